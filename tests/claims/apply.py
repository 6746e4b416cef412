# The crash test's job (tests/claims.rs): applies RECORDS records into TABLE, each in one
# transaction of a `psql` or `mysql` client it drives over a pipe (no driver library), with
# `batchguard_claim` (CLAIMS=1) or without (CLAIMS=0). DIE_AT=POINT:N kills the job's own
# process group (itself and the client) with SIGKILL at POINT of record N, once (DIE_MARK is
# created first, so the catch-up does not die again). Points: before (no transaction open),
# claim (the claim answered, the transaction open), inside (the write done, not committed),
# commit (committed, its output line not yet written).
import json, os, signal, subprocess, sys

client = json.loads(os.environ["CLIENT"])
pg = os.environ["KIND"] == "pg"
claims = os.environ.get("CLAIMS") == "1"
die = os.environ.get("DIE_AT", "")
mark = os.environ["DIE_MARK"]
records = int(os.environ.get("RECORDS", "200"))
table = os.environ["TABLE"]
job, run, fence = (os.environ[v] for v in ("BATCHGUARD_JOB", "BATCHGUARD_RUN_ID", "BATCHGUARD_FENCE"))
sync = "\\echo @@" if pg else "SELECT '@@';"
p = subprocess.Popen(client, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)


def q(sql):
    """Sends `sql` and waits until the client has run it: the lines it printed."""
    p.stdin.write(sql + "\n" + sync + "\n")
    p.stdin.flush()
    out = []
    while True:
        line = p.stdout.readline()
        if not line:
            sys.exit("the client ended: %s failed" % sql)
        line = line.rstrip("\n")
        if line == "@@":
            return out
        out.append(line)


def point(name, i):
    if die == "%s:%d" % (name, i) and not os.path.exists(mark):
        open(mark, "w").close()
        os.killpg(0, signal.SIGKILL)


outputs = open(os.environ["BATCHGUARD_OUTPUTS"], "a")
for i in range(1, records + 1):
    key = "rec:%d" % i
    point("before", i)
    q("BEGIN;" if pg else "START TRANSACTION;")
    first = True
    if claims:
        got = q("SELECT batchguard_claim('%s', '%s', '%s', %s);" % (job, key, run, fence))
        first = got[-1] in ("t", "1")
    point("claim", i)
    if first:
        q("INSERT INTO %s (rec) VALUES (%d);" % (table, i))
    point("inside", i)
    q("COMMIT;")
    point("commit", i)
    if first:
        outputs.write(key + "\n")
        outputs.flush()
p.stdin.close()
sys.exit(p.wait())
