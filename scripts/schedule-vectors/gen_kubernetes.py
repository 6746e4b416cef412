"""Writes fixtures/schedule/kubernetes.jsonl from robfig/cron v3's own test cases.

Kubernetes parses CronJob schedules with robfig/cron v3 `ParseStandard` (5 fields). The
cases below are the inputs and expected results of robfig/cron's spec_test.go (TestActivation,
TestNext, TestErrors, TestNextWithTz) recorded as data. TestNext runs a 6-field parser: a
case is kept only when its seconds field is `0`, and is given here without that field.
Times without an offset are in the test's local zone, taken as UTC here; a `TZ=` prefix of
the spec becomes the vector's zone. Cases for `L` (a later, unreleased addition) are left out:
v3.0.1 rejects `L`.
"""

import json
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

OUT = Path(__file__).parent.parent.parent / "fixtures" / "schedule" / "kubernetes.jsonl"
NY = "America/New_York"
SP = "America/Sao_Paulo"

# (time the test asks about, spec, fires there?)
ACTIVATION = [
    ("2012-07-09 15:00", "0/15 * * * *", True), ("2012-07-09 15:45", "0/15 * * * *", True),
    ("2012-07-09 15:40", "0/15 * * * *", False), ("2012-07-09 15:05", "5/15 * * * *", True),
    ("2012-07-09 15:20", "5/15 * * * *", True), ("2012-07-09 15:50", "5/15 * * * *", True),
    ("2012-07-15 15:00", "0/15 * * Jul *", True), ("2012-07-15 15:00", "0/15 * * Jun *", False),
    ("2012-07-15 08:30", "30 08 ? Jul Sun", True), ("2012-07-15 08:30", "30 08 15 Jul ?", True),
    ("2012-07-16 08:30", "30 08 ? Jul Sun", False), ("2012-07-16 08:30", "30 08 15 Jul ?", False),
    ("2012-07-09 15:00", "@hourly", True), ("2012-07-09 15:04", "@hourly", False),
    ("2012-07-09 15:00", "@daily", False), ("2012-07-09 00:00", "@daily", True),
    ("2012-07-09 00:00", "@weekly", False), ("2012-07-08 00:00", "@weekly", True),
    ("2012-07-08 01:00", "@weekly", False), ("2012-07-08 00:00", "@monthly", False),
    ("2012-07-01 00:00", "@monthly", True),
    ("2012-07-15 00:00", "* * 1,15 * Sun", True), ("2012-06-15 00:00", "* * 1,15 * Sun", True),
    ("2012-08-01 00:00", "* * 1,15 * Sun", True), ("2012-07-15 00:00", "* * */10 * Sun", True),
    ("2012-07-15 00:00", "* * * * Mon", False), ("2012-07-09 00:00", "* * 1,15 * *", False),
    ("2012-07-15 00:00", "* * 1,15 * *", True), ("2012-07-15 00:00", "* * */2 * Sun", True),
]

# (zone, after, spec without seconds, expected next or None)
NEXT = [
    ("UTC", "2012-07-09 14:45", "0/15 * * * *", "2012-07-09 15:00"),
    ("UTC", "2012-07-09 14:59", "0/15 * * * *", "2012-07-09 15:00"),
    ("UTC", "2012-07-09 14:59:59", "0/15 * * * *", "2012-07-09 15:00"),
    ("UTC", "2012-07-09 15:45", "20-35/15 * * * *", "2012-07-09 16:20"),
    ("UTC", "2012-07-09 23:46", "*/15 * * * *", "2012-07-10 00:00"),
    ("UTC", "2012-07-09 23:45", "20-35/15 * * * *", "2012-07-10 00:20"),
    ("UTC", "2012-07-09 23:35", "0 0 9 Apr-Oct ?", "2012-08-09 00:00"),
    ("UTC", "2012-07-09 23:35", "0 0 */5 Apr,Aug,Oct Mon", "2012-08-01 00:00"),
    ("UTC", "2012-07-09 23:35", "0 0 */5 Oct Mon", "2012-10-01 00:00"),
    ("UTC", "2012-07-09 23:35", "0 0 * Feb Mon", "2013-02-04 00:00"),
    ("UTC", "2012-07-09 23:35", "0 0 * Feb Mon/2", "2013-02-01 00:00"),
    ("UTC", "2012-12-31 23:59:45", "* * * * *", "2013-01-01 00:00"),
    ("UTC", "2012-07-09 23:35", "0 0 29 Feb ?", "2016-02-29 00:00"),
    (NY, "2012-03-11T00:00:00-05:00", "30 2 11 Mar ?", "2013-03-11T02:30:00-04:00"),
    (NY, "2012-03-11T00:00:00-05:00", "0 * * * ?", "2012-03-11T01:00:00-05:00"),
    (NY, "2012-03-11T01:00:00-05:00", "0 * * * ?", "2012-03-11T03:00:00-04:00"),
    (NY, "2012-03-11T03:00:00-04:00", "0 * * * ?", "2012-03-11T04:00:00-04:00"),
    (NY, "2012-03-11T04:00:00-04:00", "0 * * * ?", "2012-03-11T05:00:00-04:00"),
    (NY, "2012-03-11T00:00:00-05:00", "0 1 * * ?", "2012-03-11T01:00:00-05:00"),
    (NY, "2012-03-11T01:00:00-05:00", "0 1 * * ?", "2012-03-12T01:00:00-04:00"),
    (NY, "2012-03-11T00:00:00-05:00", "0 2 * * ?", "2012-03-12T02:00:00-04:00"),
    (NY, "2012-11-04T00:00:00-04:00", "30 2 04 Nov ?", "2012-11-04T02:30:00-05:00"),
    (NY, "2012-11-04T01:45:00-04:00", "30 1 04 Nov ?", "2012-11-04T01:30:00-05:00"),
    (NY, "2012-11-04T00:00:00-04:00", "0 * * * ?", "2012-11-04T01:00:00-04:00"),
    (NY, "2012-11-04T01:00:00-04:00", "0 * * * ?", "2012-11-04T01:00:00-05:00"),
    (NY, "2012-11-04T01:00:00-05:00", "0 * * * ?", "2012-11-04T02:00:00-05:00"),
    (NY, "2012-11-04T00:00:00-04:00", "0 1 * * ?", "2012-11-04T01:00:00-04:00"),
    (NY, "2012-11-04T01:00:00-04:00", "0 1 * * ?", "2012-11-04T01:00:00-05:00"),
    (NY, "2012-11-04T01:00:00-05:00", "0 1 * * ?", "2012-11-05T01:00:00-05:00"),
    (NY, "2012-11-04T00:00:00-04:00", "0 2 * * ?", "2012-11-04T02:00:00-05:00"),
    (NY, "2012-11-04T02:00:00-05:00", "0 2 * * ?", "2012-11-05T02:00:00-05:00"),
    (NY, "2012-11-04T00:00:00-04:00", "0 3 * * ?", "2012-11-04T03:00:00-05:00"),
    (NY, "2012-11-04T03:00:00-05:00", "0 3 * * ?", "2012-11-05T03:00:00-05:00"),
    (NY, "2012-11-04T00:00:00-04:00", "0 3 3 * ?", "2012-12-03T03:00:00-05:00"),
    (SP, "2018-10-17T05:00:00-04:00", "0 9 10 * ?", "2018-11-10T06:00:00-05:00"),
    (SP, "2018-02-14T05:00:00-05:00", "0 9 22 * ?", "2018-02-22T07:00:00-05:00"),
    ("UTC", "2012-07-09 23:35", "0 0 30 Feb ?", None),
    ("UTC", "2012-07-09 23:35", "0 0 31 Apr ?", None),
    # TestNextWithTz: the zone is the offset of the time given.
    ("+05:30", "2016-01-03T13:09:03+05:30", "14 14 * * *", "2016-01-03T14:14:00+05:30"),
    ("+05:30", "2016-01-03T04:09:03+05:30", "14 14 * * ?", "2016-01-03T14:14:00+05:30"),
    ("+05:30", "2016-01-03T14:09:03+05:30", "14 14 * * *", "2016-01-03T14:14:00+05:30"),
    ("+05:30", "2016-01-03T14:00:00+05:30", "14 14 * * ?", "2016-01-03T14:14:00+05:30"),
]

# TestErrors, TestSlash0NoHang, and what v3.0.1 rejects that other dialects accept.
INVALID = ["xyz", "60 0 * * *", "0 60 * * *", "0 0 * * XYZ", "0-0-0 * * * *", "*/5/5 * * * *",
           "59-2 * * * *", "15/0 * * * *", "0 0 * * 7", "0 0 L * *", "0 0 * * 5#2", "0 0 15W * *",
           "0 0 0 * * *", "* * * *"]


def zone_name(z):
    return "UTC" if z == "UTC" else z


def parse(s, z):
    if "T" in s:
        return datetime.fromisoformat(s)
    fmt = "%Y-%m-%d %H:%M:%S" if s.count(":") == 2 else "%Y-%m-%d %H:%M"
    return datetime.strptime(s, fmt).replace(tzinfo=ZoneInfo("UTC"))


def main():
    lines = []
    for at, spec, fires in ACTIVATION:
        t = parse(at, "UTC")
        lines.append({"dialect": "kubernetes", "expr": spec, "tag": "robfig-activation", "tz": "UTC",
                      "after": (t - timedelta(seconds=1)).isoformat(), "next_is": t.isoformat(), "equal": fires})
    for z, after, spec, nxt in NEXT:
        t = parse(after, z)
        v = {"dialect": "kubernetes", "expr": spec, "tag": "robfig-next", "tz": zone_name(z), "after": t.isoformat(),
             "next_is": parse(nxt, z).isoformat() if nxt else None, "equal": True}
        lines.append(v)
    for spec in INVALID:
        lines.append({"dialect": "kubernetes", "expr": spec, "tag": "robfig-errors", "valid": False})
    OUT.write_text("".join(json.dumps(l) + "\n" for l in lines))
    print("kubernetes", len(lines))


if __name__ == "__main__":
    main()
