"""bench/scale.py's numbers: windows from snapshots and client statistics, tables, checks, plots.

Every rate is a difference of two snapshots taken at whole monotonic seconds (the servers' own
Prometheus counters, psutil) or a sum of the stand-ins' per-second counters between them; fetch
latencies are the stand-ins' log-binned histograms merged over the window (bins ~6% wide).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from scale_clients import FIELDS, bin_seconds  # noqa: E402
from stats import spread  # noqa: E402

PPO_SERVERS = ("buffer", "learner", "param-server", "metrics")
PARAMS_IN = "surreal_port_messages_total{port=params,direction=in}"
PARAMS_OUT_BYTES = "surreal_port_bytes_total{port=params,direction=out}"
METRICS_IN = "surreal_port_messages_total{port=metrics,direction=in}"


def clients_between(stats: list[dict], t0: int, t1: int) -> dict:
    """The stand-ins' counters summed over seconds [t0, t1), and their latency histogram."""
    sums, hist, lag = dict.fromkeys(FIELDS, 0), Counter(), Counter()
    for st in stats:
        for sec, bins in st.get("lag", {}).items():
            if t0 <= int(sec) < t1:
                lag.update({int(b): n for b, n in bins.items()})
        for sec, counts in st["counts"].items():
            if t0 <= int(sec) < t1:
                for name, n in zip(st["fields"], counts, strict=True):
                    sums[name] += n
        for sec, bins in st["hist"].items():
            if t0 <= int(sec) < t1:
                hist.update({int(b): n for b, n in bins.items()})
    return {**sums, "hist": hist, "lag": lag}


def percentile(hist: Counter, q: float) -> float:
    """The q-quantile (seconds) of a latency histogram; nan when it is empty."""
    total = sum(hist.values())
    if not total:
        return math.nan
    rank, seen = q * total, 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= rank:
            return bin_seconds(b)
    return bin_seconds(max(hist))


def _delta(a: dict, b: dict, server: str, key: str) -> float:
    return b["prom"].get(server, {}).get(key, 0.0) - a["prom"].get(server, {}).get(key, 0.0)


def window(
    a: dict, b: dict, stats: list[dict], kind: str, publish_every: int = 1, chunk: int = 1
) -> dict:
    """One window's numbers from snapshots `a`, `b` and the stand-ins' statistics (DDPG: the
    offered and stored rates in transitions, `chunk` per pushed message)."""
    dt = b["mono"] - a["mono"]
    seconds = b["t"] - a["t"]
    cl = clients_between(stats, a["t"], b["t"])
    servers = sorted(b["res"])
    out = {
        "offered_s": cl["segments"] / seconds,
        "p50_ms": 1000 * percentile(cl["hist"], 0.5),
        "p99_ms": 1000 * percentile(cl["hist"], 0.99),
        "client_lag_p99_ms": 1000 * percentile(cl["lag"], 0.99),
        "fetch_s": cl["fetches"] / seconds,
        "polls_s": cl["polls"] / seconds,
        "with_params_s": cl["with_params"] / seconds,
        "client_mb_s": cl["bytes_in"] / seconds / 1e6,
        "reports_s": cl["reports"] / seconds,
        "retries": cl["retries"],
        "errors": cl["errors"],
        "rows_s": _delta(a, b, "metrics", METRICS_IN) / dt,
        "invalid": sum(_delta(a, b, s, "surreal_invalid_messages_total") for s in servers),
        "client_cores": (b["client_cpu"] - a["client_cpu"]) / dt,
        "cores": {s: (b["res"][s]["cpu"] - a["res"][s]["cpu"]) / dt for s in servers},
        "rss": {s: b["res"][s]["rss"] for s in servers},
        "fds": {s: b["res"][s]["fds"] for s in servers},
    }
    params = [s for s in servers if s.startswith("param-server")]
    out["server_req_s"] = sum(_delta(a, b, s, PARAMS_IN) for s in params) / dt
    out["param_mb_s"] = sum(_delta(a, b, s, PARAMS_OUT_BYTES) for s in params) / dt / 1e6
    if kind == "ppo":
        learn = sum(
            _delta(a, b, "learner", f"surreal_phase_seconds_total{{phase={p}}}")
            for p in ("learn", "publish")
        )
        wait = _delta(a, b, "learner", "surreal_phase_seconds_total{phase=wait}")
        out["segments_s"] = _delta(a, b, "buffer", "surreal_buffer_added_total") / dt
        out["updates_s"] = _delta(a, b, "learner", "surreal_learner_iterations_total") / dt
        out["busy"] = learn / (learn + wait) if learn + wait > 0 else math.nan
    else:
        added = sum(v["added"] for v in b["replay"].values()) - sum(
            v["added"] for v in a["replay"].values()
        )
        out["transitions_s"] = added / dt
        out["segments_s"] = out["transitions_s"]  # the replay's intake, in transitions
        out["offered_s"] *= chunk
        version = _delta(a, b, "param-server-0", "surreal_policy_version")
        out["updates_s"] = version * publish_every / dt
        out["busy"] = math.nan  # the DDPG learner keeps no phase counters
    return out


def pooled(snaps: list[dict], stats: list[dict]) -> dict:
    """Fetch latency percentiles over a whole phase (every window's fetches together)."""
    cl = clients_between(stats, snaps[0]["t"], snaps[-1]["t"])
    return {
        "p50_ms": 1000 * percentile(cl["hist"], 0.5),
        "p99_ms": 1000 * percentile(cl["hist"], 0.99),
        "fetches": cl["fetches"],
    }


def summarize(windows: list[dict]) -> dict:
    """Median [min-max] over windows of every number (per server for the dict-valued ones)."""
    out = {}
    for key, value in windows[0].items():
        if isinstance(value, dict):
            out[key] = {s: spread([w[key][s] for w in windows]) for s in value}
        elif key in ("retries", "errors", "invalid"):
            out[key] = sum(w[key] for w in windows)
        else:
            out[key] = spread([None if _nan(w[key]) else w[key] for w in windows])
    return out


def _nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)


def fmt(s, digits: int = 0) -> str:
    """A Spread as 'median [low-high]' (or the number itself)."""
    if not hasattr(s, "median"):
        return str(s)
    if s.n == 0:
        return "-"
    f = f"{{:,.{digits}f}}"
    if s.low == s.high:
        return f.format(s.median)
    return f"{f.format(s.median)} [{f.format(s.low)}-{f.format(s.high)}]"


def mb(s) -> str:
    return fmt(type(s)(s.median / 2**20, s.low / 2**20, s.high / 2**20, s.n), 1)


def throughput_rows(rows: list[dict], key_name: str) -> tuple[list[str], list[list[str]]]:
    """The throughput table: one row per (N or shards, phase)."""
    head = [
        key_name,
        "phase",
        "offered/s",
        "into buffer/s",
        "learner upd/s",
        "busy",
        "fetch p50 ms",
        "fetch p99 ms",
        "fetches/s",
        "param req/s",
        "param MB/s",
        "metrics rows/s",
        "client cores",
        "client lag p99 ms",
        "retries",
        "errors",
    ]
    body = []
    for r in rows:
        s = r["summary"]
        busy = s["busy"]
        body.append(
            [
                str(r["key"]),
                r["phase"],
                fmt(s["offered_s"]),
                fmt(s["segments_s"]),
                fmt(s["updates_s"], 1),
                "-" if busy.n == 0 else f"{busy.median:.0%}",
                fmt(s["p50_ms"], 1),
                fmt(s["p99_ms"], 1),
                fmt(s["fetch_s"]),
                fmt(s["server_req_s"]),
                fmt(s["param_mb_s"], 1),
                fmt(s["rows_s"]),
                fmt(s["client_cores"], 2),
                fmt(s["client_lag_p99_ms"], 1),
                str(s["retries"]),
                str(int(s["errors"] + s["invalid"])),
            ]
        )
    return head, body


def resource_rows(rows: list[dict], key_name: str) -> tuple[list[str], list[list[str]]]:
    """Per server: RSS MiB / open fds / cores used, at the end of each window (median)."""
    first = rows[0]["summary"]["rss"]
    servers = list(first)
    head = [key_name, "phase", *[f"{s} RSS MiB / fds / cores" for s in servers]]
    body = []
    for r in rows:
        s = r["summary"]
        cells = [
            f"{mb(s['rss'][v])} / {s['fds'][v].median:.0f} / {s['cores'][v].median:.2f}"
            for v in servers
        ]
        body.append([str(r["key"]), r["phase"], *cells])
    return head, body


def print_table(title: str, head: list[str], body: list[list[str]], md: list[str]) -> None:
    """Print an aligned table and append its markdown version to `md`."""
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for row in body:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    md += ["", f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(row) + " |" for row in body]


def checks(rows: list[dict], phase: str, elapsed: float | None, problems: list[str]) -> list[tuple]:
    """The must-show checks on the sweep's `phase` rows: (name, passed, detail)."""
    sel = [r for r in rows if r["phase"] == phase]
    lo, hi = sel[0], sel[-1]
    out = []
    if elapsed is not None:
        out.append(("full run <= 600 s", elapsed <= 600, f"{elapsed:.0f} s"))
    a, b = lo["summary"]["segments_s"].median, hi["summary"]["segments_s"].median
    ratio = b / a if a else math.nan
    out.append(
        (
            f"segments/s into the buffer at N={hi['key']} >= 0.8x N={lo['key']}",
            ratio >= 0.8,
            f"{b:,.1f} / {a:,.1f} = {ratio:.2f}x",
        )
    )
    a, b = lo["pooled"]["p99_ms"], hi["pooled"]["p99_ms"]
    ratio = b / a if a else math.nan
    out.append(
        (
            f"parameter fetch p99 at N={hi['key']} <= 4x N={lo['key']} (all fetches of the phase)",
            ratio <= 4.0,
            f"{b:.1f} ms / {a:.1f} ms = {ratio:.2f}x "
            f"({hi['pooled']['fetches']:,} / {lo['pooled']['fetches']:,} fetches)",
        )
    )
    added = hi["key"] - lo["key"]
    for server in lo["summary"]["rss"]:
        grow = (hi["summary"]["rss"][server].median - lo["summary"]["rss"][server].median) / added
        out.append(
            (
                f"{server} RSS growth <= 200 KB per connected actor",
                grow <= 200 * 1024,
                f"{grow / 1024:+.1f} KB/actor ({added} actors more)",
            )
        )
    invalid = int(sum(r["summary"]["invalid"] for r in rows))
    out.append(
        (
            "no error (stand-in errors, invalid messages, crashes, dead servers; every section)",
            invalid == 0 and not problems,
            f"{invalid} invalid messages; {'; '.join(problems) or 'no crash, no stand-in error'}",
        )
    )
    return out


def print_checks(results: list[tuple], md: list[str], title: str) -> None:
    print(f"\n{title}")
    md += ["", f"**{title}**", ""]
    for name, passed, detail in results:
        line = f"{'PASS' if passed else 'FAIL'}  {name}: {detail}"
        print(line)
        md.append(f"- {line}")


def span_rates(timeline: list[dict], spans: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Learner updates/s over each churn span."""
    rates = {}
    for name, (t0, t1) in spans.items():
        inside = [s for s in timeline if t0 <= s["mono"] <= t1]
        if len(inside) >= 2:
            a, b = inside[0], inside[-1]
            rates[name] = (b["iterations"] - a["iterations"]) / (b["mono"] - a["mono"])
    return rates


def churn_checks(timeline: list[dict], spans: dict[str, tuple[float, float]], phase: str) -> list:
    """Item 6's check: with the stand-ins stopped or churning, updates/s >= 0.9x before."""
    rates = span_rates(timeline, spans)
    base = rates.get("before")
    out = []
    for name, rate in rates.items():
        if name.startswith(("paused", "kill+restart")) and base:
            out.append(
                (
                    f"churn ({phase}): learner updates/s while {name} >= 0.9x before",
                    rate >= 0.9 * base,
                    f"{rate:.2f} / {base:.2f} = {rate / base:.2f}x",
                )
            )
    return out


def churn_rates(timeline: list[dict], spans: dict[str, tuple[float, float]]) -> list[list[str]]:
    """Per churn phase: learner updates/s and segments/s over the span, and 1-s medians."""
    body = []
    base = None
    for name, (t0, t1) in spans.items():
        inside = [s for s in timeline if t0 <= s["mono"] <= t1]
        if len(inside) < 2:
            continue
        a, b = inside[0], inside[-1]
        dt = b["mono"] - a["mono"]
        upd = (b["iterations"] - a["iterations"]) / dt
        seg = (b["added"] - a["added"]) / dt
        per_s = [
            (y["iterations"] - x["iterations"]) / (y["mono"] - x["mono"])
            for x, y in zip(inside, inside[1:], strict=False)
        ]
        base = upd if base is None else base
        ratio = upd / base if base else math.nan
        body.append(
            [
                name,
                f"{dt:.0f}",
                f"{upd:.2f}",
                f"{ratio:.2f}x",
                fmt(spread(per_s), 2),
                f"{seg:.1f}",
                f"{statistics.median(s['alive'] for s in inside):.0f}",
            ]
        )
    return body


def plot(rows: list[dict], ddpg: list[dict], timeline: list[dict], spans: dict, out: Path) -> None:
    """Segments/s, fetch p99 and RSS against N; DDPG intake against shards; churn timeline."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
    for phase in dict.fromkeys(r["phase"] for r in rows):
        sel = [r for r in rows if r["phase"] == phase]
        ns = [r["key"] for r in sel]
        axes[0].plot(ns, [r["summary"]["segments_s"].median for r in sel], "o-", label=phase)
        axes[1].plot(ns, [r["summary"]["p99_ms"].median for r in sel], "o-", label=phase)
    if rows:
        sel = [r for r in rows if r["phase"] == rows[0]["phase"]]
        for server in sel[0]["summary"]["rss"]:
            axes[2].plot(
                [r["key"] for r in sel],
                [r["summary"]["rss"][server].median / 2**20 for r in sel],
                "o-",
                label=server,
            )
    for ax, label in zip(
        axes[:3], ("segments/s into buffer", "fetch p99 (ms)", "RSS (MiB)"), strict=False
    ):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("stand-in actors")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    axes[1].set_yscale("log")
    if timeline:
        t0 = timeline[0]["mono"]
        xs = [(b["mono"] - t0) for b in timeline[1:]]
        ys = [
            (b["iterations"] - a["iterations"]) / (b["mono"] - a["mono"])
            for a, b in zip(timeline, timeline[1:], strict=False)
        ]
        axes[3].plot(xs, ys, lw=1)
        for i, (name, (s0, s1)) in enumerate(spans.items()):
            if name.startswith(("paused", "kill")):
                axes[3].axvspan(s0 - t0, s1 - t0, color=f"C{i}", alpha=0.2, label=name)
        axes[3].set_xlabel("seconds")
        axes[3].set_ylabel("learner updates/s")
        axes[3].legend(fontsize=7)
    elif ddpg:
        axes[3].plot([r["key"] for r in ddpg], [r["summary"]["segments_s"].median for r in ddpg])
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")
