"""Regenerates fixtures/schedule/crontab.jsonl from cronsim (pinned in requirements.txt).

cronsim follows Debian cron, including its DST rules. It has no @macros, so a macro is fed
to it as the expansion Debian cron documents (crontab(5)); it also accepts L, W, # and a
seconds field, which Debian cron does not, so those are not asked (see docs/schedules.md).
Usage: pip install -r requirements.txt && python3 gen_crontab.py
"""

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

HERE = Path(__file__).parent
OUT = HERE.parent.parent / "fixtures" / "schedule" / "crontab.jsonl"
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}


def fmt(dt, tz):
    return dt.astimezone(tz).isoformat()


def main():
    cases = json.loads((HERE / "cases.json").read_text())
    lines = []

    def emit(expr, windows, tag):
        fed = MACROS.get(expr, expr)  # Debian cron compares macro names case-sensitively
        if len(fed.split()) != 5:
            lines.append({"dialect": "crontab", "expr": expr, "tag": tag, "valid": False,
                          "error": "Debian cron takes 5 fields or a macro"})
            return
        try:
            CronSim(fed, datetime(2026, 1, 1, tzinfo=timezone.utc))
        except CronSimError as e:
            lines.append({"dialect": "crontab", "expr": expr, "tag": tag, "valid": False, "error": str(e)})
            return
        for w in windows:
            tz = ZoneInfo(w["tz"])
            start = datetime.fromisoformat(w["from"]).astimezone(tz)
            end = datetime.fromisoformat(w["to"]).astimezone(tz)
            # [from, to): cronsim yields instants strictly after its start.
            it = CronSim(fed, start - timedelta(seconds=1))
            out = []
            to = end
            for dt in it:
                if dt >= end:
                    break
                out.append(dt)
                if len(out) >= w["cap"]:
                    to = dt + timedelta(seconds=1)
                    break
            lines.append({"dialect": "crontab", "expr": expr, "tag": tag, "tz": w["tz"],
                          "from": fmt(start, tz), "to": fmt(to, tz), "slots": [fmt(d, tz) for d in out]})

    skip = set(cases["lwh"]) | set(cases["seconds"]) | set(cases["croner_only"])
    for expr in cases["five_field"] + cases["invalid"]:
        if expr not in skip:
            emit(expr, cases["general_windows"], "general")
    for expr in cases["dst"]:
        emit(expr, cases["dst_windows"], "dst")
    OUT.write_text("".join(json.dumps(l) + "\n" for l in lines))
    print("crontab", len(lines))


if __name__ == "__main__":
    main()
