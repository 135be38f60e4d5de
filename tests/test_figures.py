"""Figures from measurements (issue 50, item 2): every figure marked in README.md, docs/ and CHANGELOG.md is what
its file under docs/measurements/ gives (``scripts/figures.py``, ``docs/measurements/figures.toml``): a page
edited by hand, a figure naming no file, or a file gone fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# scripts/figures.py, loaded from its path (scripts/ is no package the install provides)
_SPEC = importlib.util.spec_from_file_location(
    "figures", Path(__file__).resolve().parents[1] / "scripts" / "figures.py"
)
figures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(figures)
_LOG_SPEC = importlib.util.spec_from_file_location("log_json", Path(figures.__file__).with_name("log_json.py"))
log_json = importlib.util.module_from_spec(_LOG_SPEC)
_LOG_SPEC.loader.exec_module(log_json)
MEASURED = figures.MEASURED


def test_every_marked_figure_is_what_its_file_gives():
    values = figures.figures()
    assert not figures.differences(values), "\n".join(figures.differences(values))
    used = {name for page in figures.pages() for name, _ in figures.MARK.findall(page.read_text())}
    assert used == set(values), f"figures no page quotes: {sorted(set(values) - used)}"


def test_a_retyped_figure_and_a_missing_file_are_caught(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("relu costs <!--fig:relu_cuda_default-->0.80x<!--/fig--> and <!--fig:nope-->1x<!--/fig-->.")
    monkeypatch.setattr(figures, "pages", lambda: [page])
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    bad = figures.differences(figures.figures())
    assert bad == ["page.md: relu_cuda_default: the page has '0.80x', its file gives '0.91x'",
                   "page.md: nope: no such figure in docs/measurements/figures.toml"]  # fmt: skip
    assert figures.write(figures.figures()) == 1 and "<!--fig:relu_cuda_default-->0.91x<!--/fig-->" in page.read_text()
    monkeypatch.setattr(figures, "MEASURED", tmp_path)
    (tmp_path / "figures.toml").write_text('[x]\nfile = "gone.json"\nexpr = "1"\nformat = "{}"\n')
    with pytest.raises(FileNotFoundError, match=r"figure 'x' cites docs/measurements/gone\.json, which is not there"):
        figures.figures()


def test_every_json_parsed_from_a_log_is_what_its_log_gives():
    """A JSON written by scripts/log_json.py from a probe's log (``parsed_by``) equals a parse of that log today:
    the figures computed from it cannot drift from what the run printed."""
    import json

    parsed = [p for p in sorted(MEASURED.glob("*.json")) if "parsed_by" in json.loads(p.read_text())]
    assert parsed, "no JSON parsed from a log under docs/measurements"
    for path in parsed:
        data = json.loads(path.read_text())
        again = log_json.PARSERS[data["parsed_by"]]((MEASURED / data["log"]).read_text())
        assert {**again, "log": data["log"], "parsed_by": data["parsed_by"]} == data, path.name


def test_a_log_line_the_parser_cannot_read_is_an_error():
    text = (MEASURED / "2026-11-28-flce-gemms-h200.txt").read_text()
    with pytest.raises(ValueError, match="unreadable line"):
        log_json.flce(text.replace("4.801", "4.8O1"))


@pytest.mark.parametrize(
    ("kind", "log", "wording"),
    [
        ("cute-probe", "2026-11-23-rmsnorm-cute-probe-h200.txt", "the same backward measured"),
        ("cluster-backward", "2026-11-24-rmsnorm-cluster-backward-h100.txt", "copy-equivalent"),
        ("cluster-backward", "2026-11-24-rmsnorm-cluster-backward-h100.txt", "second sweep"),
    ],
)
def test_a_lab_log_whose_reading_lost_a_wording_is_an_error(kind, log, wording):
    """A figure a page takes from a lab log's written reading is found by its wording: reworded, the parse fails
    naming what it looked for, instead of returning a figure from elsewhere."""
    text = (MEASURED / log).read_text()
    assert wording in text
    with pytest.raises(ValueError, match="no "):
        log_json.PARSERS[kind](text.replace(wording, "reworded"))


def test_a_step_kernel_list_reads_the_side_by_side_rows():
    """The Llama probe's side-by-side table is read row by row: one row's launches changed in the log change the
    parsed figure (the figures docs/llama.md takes per copy kernel come from these rows)."""
    text = (MEASURED / "2026-11-27-llama-h100.txt").read_text()
    row = "inductor     0.00/0      2.01/32     0.00/0      0.00/0    triton_poi_fused_4"
    assert row in text
    parsed = log_json.PARSERS["step-kernels"](text.replace(row, row.replace("2.01/32", "2.01/16")))
    fused = next(r for r in parsed["side_by_side"]["rows"] if r["name"] == "triton_poi_fused_4")
    assert fused["calls"] == [0, 16, 0, 0]


def test_no_page_types_a_measured_figure():
    assert not figures.unmarked(), "\n".join(figures.unmarked())


def test_a_typed_figure_is_found_and_targets_quotes_and_shapes_are_not(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(
        'The op runs at 12.5 us and 1.04x aten, target >= 95% of copy (was "96.1%").\n'
        "A shape of 8 x 4,096 on 2 x H200; <!--fig:relu_cuda_default-->0.91x<!--/fig--> marked.\n\n"
        "```\n# a code block keeps its 3.2 ms\n```\n"
    )
    monkeypatch.setattr(figures, "pages", lambda: [page])
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    assert [line.split(": ")[1] for line in figures.unmarked()] == ["12.5 us", "1.04x"]
