"""``pp-underfilled-slots``: enough requests ran to give every stage a micro-batch, but
admission packed them into fewer slots than stages.

Admission front-packs the slots (up to the prefill chunk budget, or the per-slot cap) and a
request stays in the slot that admitted it, so the stages without a micro-batch wait. The remedy
is a per-slot cap (``--pp-max-micro-batch-size``) that spreads the load over the stages; its
gain is sized three ways, the first the run allows:

* **measured after**: a peer run of the same model, machine and layout that changed the cap
  measured the load (``promise``);
* **measured curve**: the rounds of the run's own under-filled phases against their micro-batch
  sizes (``trip_curve``) give the round at a smaller micro-batch; the range carries the noise of
  the phase and how far that arithmetic misses the run's own filled phases;
* **modelled**: the serving model as packed and with the cap, scaled by the run's measured /
  modelled ratio, under every plausible variant of its assumed constants.
"""

from __future__ import annotations

import math
from typing import Any

from toolkit.analyze.effects import TripCurve, trip_curve
from toolkit.analyze.occupancy import slots_shown
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.noise import model_band, model_range, throughput_noise
from toolkit.diagnose.promise import Promised, measured_after, promise_table, remedy_runs
from toolkit.diagnose.prose import loads
from toolkit.diagnose.sizing import Sizing, ratio, spread
from toolkit.diagnose.slots import (
    judged,
    load_of_row,
    measured_round,
    slot_evidence,
    slowest_stage_ratio,
    trip_points,
)
from toolkit.diagnose.thresholds import ASSUMED_MODEL_ERROR, METHOD_ERROR
from toolkit.run_analysis import RunAnalysis

__all__ = ["pp_underfilled_slots"]

_SETTING = "pp_max_micro_batch_size"


def pp_underfilled_slots(ctx: RunAnalysis) -> Finding | None:
    """Enough requests ran to give every stage a micro-batch, but fewer slots held them."""
    if ctx.pp < 2:
        return None
    rows = judged(ctx)
    faults = [r for r in rows if r["verdict"] == "under-filled"]
    if not faults:
        return None
    p = ctx.pp
    curve = trip_curve(trip_points(ctx, rows))
    candidates = [r for r in rows if not r["verdict"].startswith("inherent")]
    best = max(faults, key=load_of_row)  # scaling is about the top: the highest load that packs
    c = load_of_row(best)
    first = slowest_stage_ratio(ctx, best["slot_req"] or 1.0)
    cap = _best_cap(ctx, best, curve, first[0]) or max(math.ceil(c / p), 1)
    estimate = _Estimate(ctx, rows, curve, slowest_stage_ratio(ctx, cap))
    for r in rows:
        r.update(estimate.model_columns(r, cap))
    remedies = remedy_runs(ctx, _SETTING, lambda x: x.layout.pp_max_micro_batch_size)
    table = promise_table(ctx, _SETTING, remedies, estimate.promise_at)
    sizing, sizing_text = estimate.headline(best, cap, table)
    for r in rows:
        promised = estimate.promised(r, cap)
        r["remedy_tok_s"] = promised.tok_s if promised is not None else None
    active, slot = round(best["active_slots_est"]), round(best["slot_req"])
    summary = (
        f"{c} requests in flight, but #token implies {slots_shown(best)} active; each "
        f"slot holds {slot} (#running-req), so only ~{active} of {p} stages have a micro-batch "
        f"to work on and each GPU idles about {max(0.0, 1 - active / p):.0%} of a round."
    )
    cause = _cause(ctx, best)
    if cause:
        summary += " " + cause
    if best["replay"]:
        summary += f" Replaying admission for this burst gives {best['replay']}."
    summary += sizing_text
    summary += _trade(ctx, estimate, candidates, cap)
    fields: dict[str, Any] = sizing.fields() if sizing is not None else {"severity": "info"}
    return Finding(
        id="pp-underfilled-slots",
        title=f"{slots_shown(best)} active at {c} requests with {p} stages",
        summary=summary,
        evidence=slot_evidence(rows, model=True),
        remedy=_remedy(ctx, cap, c),
        promise=table if table.height else None,
        **fields,
    )


class _Estimate:
    """The throughput of each phase with a per-slot cap, the way the run allows (module
    docstring), with its range."""

    def __init__(
        self,
        ctx: RunAnalysis,
        rows: list[dict[str, Any]],
        curve: TripCurve | None,
        imbalance: tuple[float, float, str],
    ):
        self.ctx, self.rows, self.curve = ctx, rows, curve
        low, high, self.imbalance_words = imbalance
        self.imbalances = (low, high) if high > low else (low,)
        self.imbalance = low
        self.by_load = {load_of_row(r): r for r in rows}
        self.curve_error = (
            _curve_error(ctx, rows, curve, self.imbalance) if curve is not None else None
        )
        untouched = [load_of_row(r) for r in rows if not r["verdict"].startswith("under")]
        self.band = model_band(ctx, untouched=untouched) if curve is None else None
        self.scale = 1.0  # measured / promised where a remedy run measured the load

    def measured(self, r: dict[str, Any]) -> float | None:
        """The phase's measured tok/s (benchmark, else the log's round)."""
        phase = self.ctx.phase(r["phase"])
        value = phase.get("bench_tok_s")
        if isinstance(value, float) and value > 0:
            return value
        rnd = measured_round(self.ctx, r)
        return load_of_row(r) / rnd if rnd else None

    def promised(self, r: dict[str, Any], cap: int) -> Promised | None:
        """The phase's throughput with ``cap`` requests a slot, and its range."""
        now = self.measured(r)
        if now is None:
            return None
        if self.curve is not None and self.curve_error is not None:
            gains = [_gain(self.ctx, self.curve, r, cap, x) for x in self.imbalances]
            if any(g is None for g in gains):
                return None
            error = self.curve_error[0]
            after = [now * g * self.scale for g in gains if g is not None]
            error = max(error, METHOD_ERROR)
            return Promised(after[0], min(after) / (1 + error), max(after) * (1 + error))
        values = self._modelled(r, cap)
        if not values:
            return None
        central = values[0]
        error = max(self.band[0] if self.band is not None else ASSUMED_MODEL_ERROR, METHOD_ERROR)
        low = min(values) / (1 + error) * self.scale
        high = max(values) * (1 + error) * self.scale
        return Promised(central * self.scale, low, high)

    def promise_at(self, concurrency: int, cap: Any) -> Promised | None:
        """The promise for a remedy run's cap at one of this run's loads; None at a load
        with fewer requests than stages (a cap changes nothing there)."""
        r = self.by_load.get(concurrency)
        if r is None or r["verdict"].startswith("inherent") or not isinstance(cap, int):
            return None
        return self.promised(r, cap)

    def _modelled(self, r: dict[str, Any], cap: int) -> list[float]:
        """The phase's throughput with ``cap`` by the serving model, scaled by its measured /
        modelled ratio as packed: the central fit first, then every plausible variant."""
        ctx, c = self.ctx, load_of_row(r)
        now = self.measured(r)
        phase = ctx.phase(r["phase"])
        isl, osl = phase.get("input_len"), phase.get("output_len")
        packed = ctx.with_layout(pp_max_micro_batch_size=_current_cap(r))
        capped = ctx.with_layout(pp_max_micro_batch_size=cap)

        def after(params: Any) -> float | None:
            before = ctx.model_tok_s(packed, c, isl, osl, params=params)
            fixed = ctx.model_tok_s(capped, c, isl, osl, params=params)
            if not before or not fixed or not now:
                return None
            return fixed * now / before

        central = after(ctx.params)
        return [central, *model_range(ctx, after)] if central is not None else []

    def model_columns(self, r: dict[str, Any], cap: int) -> dict[str, Any]:
        """The evidence's model columns: the serving model's tok/s as packed and with ``cap``."""
        ctx, c = self.ctx, load_of_row(r)
        phase = ctx.phase(r["phase"])
        isl, osl = phase.get("input_len"), phase.get("output_len")
        packed = ctx.with_layout(pp_max_micro_batch_size=_current_cap(r))
        fixed = ctx.with_layout(pp_max_micro_batch_size=cap)
        return {
            "measured_tok_s": self.measured(r),
            "now_tok_s": ctx.model_tok_s(packed, c, isl, osl),
            "fixed_tok_s": ctx.model_tok_s(fixed, c, isl, osl),
        }

    def headline(self, best: dict[str, Any], cap: int, table: Any) -> tuple[Sizing | None, str]:
        """The sizing at the headline phase and the sentences that state it."""
        ctx, c = self.ctx, load_of_row(best)
        where = f"at {c} requests"
        now = self.measured(best)
        noise, noise_words = throughput_noise(ctx, best["phase"])
        promised = self.promised(best, cap)
        check = measured_after(table, c) if table.height else None
        text = ""
        if promised is not None and now:
            text = self._promise_words(best, cap, now, promised)
        if check is not None and now:
            after, run = check
            sizing = ratio(
                now, after, basis="measured", where=where, now_noise=noise, after_noise=noise,
                rests_on=(f"{run} measured after the change", noise_words), carried=False,
            )  # fmt: skip
            self.scale = after / promised.tok_s if promised else 1.0
            text += (
                f" {run}, the same model, machine and layout with "
                f"--pp-max-micro-batch-size {_remedy_value(table, c)}, measured {after:.1f} tok/s "
                f"at {c} requests: the packing costs {sizing.words() if sizing else '?'}."
            )
            held = table.filter(table["verdict"] == "within").height
            text += f" The promise held at {held} of {table.height} loads that run measured."
            return sizing, text
        if promised is None or not now:
            return None, (
                " The cost is not sized: the run measured one micro-batch size only and "
                f"{ctx.model.describe()}."
            )
        basis = "measured" if self.curve is not None else "modelled"
        reasons = [noise_words]
        if self.curve_error is not None:
            reasons.append(self.curve_error[1])
        elif self.band is not None:
            reasons += ["assumed constants over their plausible range", self.band[1]]
        sizing = ratio(
            now,
            promised.tok_s,
            basis=basis,
            where=where,
            now_noise=noise,
            rests_on=reasons,
            carried=False,
        )
        if sizing is not None:
            low = ratio(now, promised.low, basis=basis)
            high = ratio(now, promised.high, basis=basis)
            sizing = spread(
                sizing.impact,
                [sizing.low, sizing.high, *(s.impact for s in (low, high) if s is not None)],
                basis=basis,
                where=where,
                rests_on=sizing.rests_on,
                carried=False,
            )
            text += f" The packing costs {sizing.words()}."
        return sizing, text

    def _promise_words(self, r: dict[str, Any], cap: int, now: float, promised: Promised) -> str:
        ctx, c = self.ctx, load_of_row(r)
        span = f"≈{promised.tok_s:.0f} tok/s ({promised.low:.0f}–{promised.high:.0f})"
        if self.curve is not None:
            rnd = measured_round(ctx, r)
            return (
                f" Measured here: {now:.0f} tok/s at {c} requests"
                + (f", one token per request every {rnd * 1e3:.0f} ms" if rnd else "")
                + f"; the rounds of this run's under-filled phases grow by "
                f"{self.curve.per_request_s * 1e3:.1f} ms per request in a micro-batch "
                f"({self.imbalance_words}), so with --pp-max-micro-batch-size {cap} this load "
                f"would run at {span}."
            )
        return (
            f" The serving model of {ctx.model.describe()} on {ctx.machine.describe()} expects "
            f"{span} with --pp-max-micro-batch-size {cap}, scaled by what this run measured "
            f"against it as packed ({now:.0f} tok/s)."
        )


def _remedy_value(table: Any, c: int) -> str:
    rows = table.filter(table["concurrency"] == c)
    return str(rows["setting"][0]).split("=", 1)[1] if rows.height else "?"


def _curve_error(
    ctx: RunAnalysis, rows: list[dict[str, Any]], curve: TripCurve, imbalance: float
) -> tuple[float, str]:
    """How far the capped-rate arithmetic misses this run's own phases: its points' rounds
    against the line, and the filled phases' throughput against ``_capped_rate`` as they ran;
    ``ASSUMED_MODEL_ERROR`` when no filled phase checks the regime a cap leads to."""
    errors = [abs(rnd / curve.round_s(b) - 1) for b, rnd in curve.points if curve.round_s(b) > 0]
    filled = []
    for r in rows:
        if not r["verdict"].startswith("filled"):
            continue
        rnd = measured_round(ctx, r)
        b = _current_cap(r)
        rate = _capped_rate(curve, load_of_row(r), b, b, ctx, imbalance)
        if rnd and rate > 0:
            filled.append(abs(load_of_row(r) / rnd / rate - 1))
    filled_loads = [load_of_row(r) for r in rows if r["verdict"].startswith("filled")]
    if filled:
        error = max([*errors, *filled])
        where = loads(set(filled_loads))
        return error, f"the round arithmetic misses this run's filled load {where} by {error:.0%}"
    error = max([*errors, ASSUMED_MODEL_ERROR])
    return error, (
        f"±{error:.0%} for the round arithmetic (assumed: no filled phase of this run checks it)"
    )


def _gain(
    ctx: RunAnalysis, curve: TripCurve, r: dict[str, Any], cap: int, imbalance: float
) -> float | None:
    b = _current_cap(r)
    before = _capped_rate(curve, load_of_row(r), b, b, ctx, imbalance)
    after = _capped_rate(curve, load_of_row(r), b, cap, ctx, imbalance)
    return after / before if before > 0 else None


def _capped_rate(
    curve: TripCurve, c: int, b_now: int, cap: int, ctx: RunAnalysis, imbalance: float
) -> float:
    """Requests served per second (on ``curve``'s rounds) when a cap of ``cap`` per slot packs
    ``c`` requests that ran ``b_now`` per slot: smaller micro-batches, more of them. A round is
    one micro-batch's trip until the slowest stage has more work than a trip holds: with ``n``
    micro-batches each stage makes ``n`` passes, the slowest ``imbalance`` × the mean one, so
    the round is ``trip · max(1, n·imbalance/stages)``; beyond the slot count the rest wait."""
    b = max(1, min(b_now, cap))
    n = min(math.ceil(c / b), ctx.slots)
    running = min(c, ctx.slots * b)
    rnd = curve.round_s(b) * max(1.0, n * imbalance / ctx.pp)
    return running / rnd if rnd > 0 else 0.0


def _best_cap(
    ctx: RunAnalysis, headline: dict[str, Any], curve: TripCurve | None, imbalance: float
) -> int | None:
    """The ``pp_max_micro_batch_size`` that serves the headline phase's load best on the run's
    measured round curve (None without one)."""
    if curve is None:
        return None
    c, b = load_of_row(headline), _current_cap(headline)
    return max(
        range(1, max(b, 1) + 1),
        key=lambda k: (round(_capped_rate(curve, c, b, k, ctx, imbalance), 9), k),
    )


def _trade(ctx: RunAnalysis, estimate: _Estimate, rows: list[dict[str, Any]], cap: int) -> str:
    """The loads where the cap would cost throughput, summarized: a static cap trades."""
    worse = []
    for r in rows:
        now, promised = estimate.measured(r), estimate.promised(r, cap)
        if now and promised is not None and promised.tok_s < 0.95 * now:
            worse.append(load_of_row(r))
    if not worse:
        return ""
    return (
        f" At {loads(worse, ' requests')} that cap would cost throughput: a static cap trades "
        "throughput between loads, so set it for the load you serve."
    )


def _current_cap(r: dict[str, Any]) -> int:
    """The per-slot size the phase ran with: the observed slot size."""
    return max(round(r["slot_req"] or 1), 1)


def _remedy(ctx: RunAnalysis, cap: int, c: int) -> str:
    text = (
        f"--pp-max-micro-batch-size {cap}: admission then spreads {ctx.pp * cap} requests over "
        f"{ctx.pp} slots instead of packing few. "
    )
    if ctx.depth:
        text += (
            f"--pp-async-batch-depth 0 is worth a try too: its {ctx.depth} extra slots stay "
            "empty at this load. "
        )
    return text + (
        "Try it live without a restart: POST /set_internal_state "
        f'{{"server_args": {{"pp_max_micro_batch_size": {cap}}}}}.'
    )


def _cause(ctx: RunAnalysis, row: dict[str, Any]) -> str:
    """What packed the slots: the chunk budget or the per-slot cap."""
    chunk = ctx.derived["resolved_chunked_prefill_size"]
    cap = ctx.derived["per_slot_cap"]
    slot = round(row["slot_req"] or 0)
    phase = ctx.phase(row["phase"])
    isl = phase.get("input_len")
    if cap is not None and slot >= cap:
        mrr = ctx.derived["resolved_max_running_requests"]
        source = (
            "pp_max_micro_batch_size"
            if ctx.layout.pp_max_micro_batch_size
            else f"max_running_requests // pp_size = {mrr}//{ctx.pp}"
        )
        return f"Each slot fills up to its cap of {cap} ({source}) and nothing rebalances."
    if chunk and isl and chunk / isl <= slot * 1.5:
        return (
            f"Admission packs each slot in one prefill pass of the {chunk}-token chunk budget "
            f"(~{chunk / isl:.0f} requests of ~{isl:.0f} tokens) and never rebalances."
        )
    return "Admission front-packs the slots and never rebalances them."
