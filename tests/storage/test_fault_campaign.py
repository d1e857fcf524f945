"""A short seeded fault campaign (tests/fault_campaign.py): bags, shard
sets and Arrow tables written and read on s3:// and gs:// while a proxy
injects faults (errors, dropped, cut, lost, stalled, duplicated, shifted
and doubled answers) at 1%, 5% and 20% of requests. Every read must be
exact or fail cleanly, nothing may hang, a failed write must leave the old
content (or an error), a finished one the new content, and nothing partial
may remain: no hidden objects, no spool files, no unfinished multipart
uploads.

A failure prints the campaign's report: each violation with its store,
rate, operation number, the faults it met, and the command that replays it
(`python tests/fault_campaign.py --seed ... --ops ...`).
"""

from __future__ import annotations

import pytest


import fault_campaign  # loaded through conftest.py

SEED = 7
RATES = (0.01, 0.05, 0.2)
OPS = 30
DEADLINE = 6.0


@pytest.mark.timeout(600)
def test_short_fault_campaign_has_no_violations():
    report = fault_campaign.run_campaign(stores=("s3", "gs"), rates=RATES, seed=SEED, ops=OPS,
                                         deadline=DEADLINE)
    print(report.text())
    assert report.operations == 2 * len(RATES) * OPS
    # The faults happened: at 20% every store met several kinds of them.
    for row in report.rows:
        if row.rate == 0.2:
            assert row.faults >= 10 and len(row.fault_kinds) >= 4, report.text()
    assert report.violation_counts() == {category: 0 for category in fault_campaign.CATEGORIES}, \
        report.text()
