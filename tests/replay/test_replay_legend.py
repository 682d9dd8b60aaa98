"""The terminal replay table has a legend: 14 columns without one ("recall 100%" beside "recall
all 23.8%") read as an alarm (issue 34)."""

from __future__ import annotations

from pathlib import Path

from filecache.replay.replay import replay_session
from filecache.replay.replay_metrics import combine
from filecache.replay.replay_report import TABLE_LEGEND, format_replay, format_table

SCRIPTED = Path(__file__).parents[2] / "fixtures" / "sessions" / "scripted__polyglot-peek"


def test_every_column_of_the_table_is_in_the_legend() -> None:
    replay = replay_session(SCRIPTED)
    totals = combine([replay])
    header = format_table([replay], totals).splitlines()[0]
    columns = [c.strip() for c in header.strip("|").split("|")][1:]  # after "session"
    legend = " ".join(TABLE_LEGEND.split())
    for column in columns:
        words = column.removeprefix("prompt ")
        assert words in legend, column
    text = format_replay([replay], totals)
    assert TABLE_LEGEND in text and text.index(TABLE_LEGEND) < text.index("| measure |")
    assert "a measure, not an error" in legend  # recall all below recall is not an alarm
