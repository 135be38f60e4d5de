"""The RMSNorm benchmark's throttle check (issue 39, item 4), on CPU with figures made up: a row the device
slowed by more than 5 % while it ran is named first in the summary, and a cool run names none."""

from benchmarks.bench_rmsnorm import slowed, summary, table


def _impl(fwd_ms: float) -> dict:
    return {
        "fwd_ms": fwd_ms,
        "bwd_ms": 2 * fwd_ms,
        "fwd_bwd_ms": 3 * fwd_ms,
        "fwd_frac_copy": 0.97,
        "bwd_frac_copy": 0.9,
        "fwd_GBps": 2800.0,
        "bwd_GBps": 2600.0,
        "max_abs_err_vs_fp32": 0.01,
    }


def _res(main_end: float, sweep_end: float, run_end: float) -> dict:
    impls = {"opsmith triton": _impl(0.2), "opsmith cuda": _impl(0.21), "HF eager": _impl(2.0)}
    return {"device": "H100 (made up)", "copy_start_GBps": 2900.0, "copy_end_GBps": run_end, "host_us": {},
            "main": {"shape": [8, 4096, 4096], "dtype": "bfloat16", "copy_GBps": 2944.0, "copy_end_GBps": main_end, "impls": impls},
            "sweep": [{"shape": [2048, 65536], "dtype": "bfloat16", "copy_GBps": 2944.0, "copy_end_GBps": sweep_end, "impls": impls}]}  # fmt: skip


def test_slowed_is_past_five_percent_only():
    assert slowed(2944.0, 2944.0 * 0.951) is None and slowed(2944.0, 3000.0) is None
    assert abs(slowed(2944.0, 1879.0) - (1 - 1879 / 2944)) < 1e-12


def test_the_summary_names_a_throttled_row_first():
    text = summary(_res(2940.0, 1879.0, 2100.0))
    first = text.splitlines()[0]
    assert first.startswith("!! THE DEVICE SLOWED: 1 GiB copy 2900 GB/s at the start, 2100 at the end")
    assert "rows that slowed while they ran: (2048, 65536)." in first and "(8, 4096, 4096)" not in first


def test_a_cool_run_says_nothing():
    assert "SLOWED" not in summary(_res(2930.0, 2950.0, 2890.0))


def test_the_row_itself_warns():
    res = _res(2940.0, 1879.0, 2100.0)
    assert "SLOWED" not in table(res["main"], device="H100 (made up)")
    warned = table(res["sweep"][0], device="H100 (made up)").splitlines()[-1]
    assert warned.startswith("  !! THE DEVICE SLOWED during this row: copy 2944 GB/s at its start, 1879 at its end")
