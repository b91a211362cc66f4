"""A discrete-event simulation of SGLang's ``event_loop_pp``, one process per PP rank.

Each rank runs SGLang's PP loop, iteration by iteration, with its blocking points:

1. ranks > 0 block until the previous rank passes on this iteration's request list (gloo);
2. the slot's turn: merge, admit (``SlotScheduler``, the same on every rank), else decode;
3. ranks > 0 with a batch wait for the proxy-tensor metadata (CPU) and, on the GPU stream,
   for the activations (``forward end upstream + hop``);
4. the output ring: the last rank sends slot ``i−d``'s tokens to rank 0, other ranks forward
   what they received last iteration, every rank receives slot ``i+1``'s tokens (before the
   launch when ``d > 0``);
5. the launch on the rank's GPU stream (in order);
6. if slot ``i+1`` has a batch, the CPU blocks until its tokens are on this rank, then spends
   ``overhead_s`` processing them (on rank 0 this is where requests finish and new ones arrive);
7. ranks below the last send the proxy metadata of slot i.

``relay_coupling=True`` adds a stream fence that is inferred, not read in SGLang's code: with
``d > 0`` and PP communication on the scheduler stream, slot i's forward also waits for the
receive of slot i+1's tokens that was posted before it, which can cost up to ``(n − 1)`` stage
steps per round in an uneven or under-filled pipeline. Without it the closed form
(``toolkit.analyze.model.predict``) and this simulation agree on steady decode (tests).

The result (``sim_result``) keeps every event a synthetic-log generator needs: forwards per
rank, the batch decisions with their schedule and processing times per rank, and the requests'
lifecycle.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Generator
from typing import Any

import polars as pl

from toolkit.analyze.model.admission import Batch, Request, SlotScheduler
from toolkit.analyze.model.sim_result import (
    SIM_BATCHES,
    SIM_FORWARDS,
    SIM_REQUESTS,
    SIM_UTILIZATION,
    SimSummary,
    Simulation,
    batch_table,
    nan_none,
    steady_summary,
)
from toolkit.analyze.model.spec import Layout, Params, StageClock, Workload
from toolkit.errors import ToolkitError

__all__ = [
    "SIM_BATCHES",
    "SIM_FORWARDS",
    "SIM_REQUESTS",
    "SIM_UTILIZATION",
    "SimSummary",
    "Simulation",
    "simulate",
]

# ── a tiny process engine ─────────────────────────────────────────────────────────────────────────

# A process yields ("sleep", dt), ("until", t) or ("recv", key); a recv resumes with the payload
# posted for that key, at max(now, the post's arrival time).


class _Engine:
    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Generator[Any, Any, None], Any]] = []
        self._seq = itertools.count()
        self._mail: dict[tuple[Any, ...], tuple[float, Any]] = {}
        self._waiting: dict[tuple[Any, ...], Generator[Any, Any, None]] = {}

    def spawn(self, proc: Generator[Any, Any, None]) -> None:
        self._push(0.0, proc, None)

    def post(self, key: tuple[Any, ...], at: float, payload: Any = None) -> None:
        proc = self._waiting.pop(key, None)
        if proc is None:
            self._mail[key] = (at, payload)
        else:
            self._push(max(at, self.now), proc, payload)

    def _push(self, t: float, proc: Generator[Any, Any, None], value: Any) -> None:
        heapq.heappush(self._queue, (t, next(self._seq), proc, value))

    def run(self, max_events: int) -> None:
        events = 0
        while self._queue:
            t, _, proc, value = heapq.heappop(self._queue)
            self.now = t
            events += 1
            if events > max_events:
                raise ToolkitError(
                    f"simulation: more than {max_events} events; ask for fewer steps"
                )
            try:
                op, arg = proc.send(value)
            except StopIteration:
                continue
            if op == "sleep":
                self._push(t + arg, proc, None)
            elif op == "until":
                self._push(max(t, arg), proc, None)
            elif arg in self._mail:
                at, payload = self._mail.pop(arg)
                self._push(max(t, at), proc, payload)
            else:
                self._waiting[arg] = proc
        if self._waiting:  # a bug in the loop model, not a user error
            raise RuntimeError(f"simulation deadlock: waiting on {sorted(self._waiting)[:3]}")


# ── the loop ──────────────────────────────────────────────────────────────────────────────────────


class _Loop:
    def __init__(
        self,
        layout: Layout,
        workload: Workload,
        params: Params,
        *,
        steps: int | None,
        duration_s: float | None,
        seed: int,
        relay_coupling: bool,
        message_s: float,
        iteration_s: float,
        jitter: float,
    ) -> None:
        self.layout, self.workload, self.params = layout, workload, params
        self.p, self.L, self.d = layout.pp, layout.loop_size, layout.pp_async_batch_depth
        self.clock = StageClock(layout, params)
        self.sched = SlotScheduler(layout, params.model)
        self.rng = random.Random(seed)
        self.steps, self.duration_s = steps, duration_s
        self.coupling = relay_coupling and self.p > 1 and self.d > 0
        self.msg, self.iter_s, self.jitter = message_s, iteration_s, jitter
        self.overhead = params.hardware.overhead_s
        self.eng = _Engine()
        self.decisions: list[Batch | None] = []
        self.n_total: int | None = None
        self.gpu_free = [0.0] * self.p
        self.last_end: dict[int, float] = {}  # last rank's forward ends, until sent
        self.tokens_at: dict[tuple[int, int], float] = {}  # (rank, iteration) → tokens on rank
        self.requests: list[Request] = []
        self.arrivals: list[Request] = []
        self.forwards: list[tuple[Any, ...]] = []
        self.scheduled: dict[tuple[int, int], float] = {}
        self.processed: dict[tuple[int, int], float] = {}
        self.generated_at: list[float] = []  # rank-0 processing time of every output token

    # requests
    def _new_request(self, now: float) -> None:
        w = self.workload
        if w.num_requests is not None and len(self.requests) >= w.num_requests:
            return
        rid = len(self.requests)
        req = Request(
            rid,
            _jittered(w.input_len, w.input_jitter, self.rng),
            _jittered(w.output_len, w.output_jitter, self.rng),
            arrival_s=now,
        )
        self.requests.append(req)
        self.arrivals.append(req)

    def _decide(self, n: int, now: float) -> Batch | None:
        """Rank 0's turn decision for iteration n; every other rank replays it."""
        for req in self.arrivals:
            self.sched.submit(req)
        self.arrivals.clear()
        stop = (self.steps is not None and n >= self.steps) or (
            self.duration_s is not None and now >= self.duration_s
        )
        no_work = self.sched.idle() and not self.arrivals
        exhausted = self.workload.num_requests is not None and len(self.requests) >= (
            self.workload.num_requests
        )
        if self.n_total is None and (stop or (no_work and exhausted)):
            self.n_total = n + self.L + self.p  # drain: let every launched batch come back
        batch = None if self.n_total is not None else self.sched.turn(n % self.L, now)
        self.decisions.append(batch)
        return batch

    def _duration(self, rank: int, batch: Batch) -> float:
        if batch.kind == "decode":
            t = self.clock.decode(rank, batch.size)
        else:
            t = self.clock.prefill(rank, batch.new_tokens)
        if self.jitter:
            t *= 1.0 + self.rng.uniform(-self.jitter, self.jitter)
        return t

    def _exchange(self, r: int, n: int) -> Generator[Any, Any, float]:
        """Step 4: send along the output ring, receive slot i+1's tokens; returns their arrival."""
        p, now = self.p, self.eng.now
        if r == p - 1:
            m = n - self.d  # the last rank sends the buffered output of slot i−d
            if m >= 0 and self.decisions[m] is not None:
                data = max(self.last_end.pop(m), now) + self.clock.hop(0)
                self.eng.post(("out", r, m), now + self.msg, data)
        else:
            m = n - self.L  # forward what arrived in the previous iteration
            if m >= 0 and self.decisions[m] is not None:
                data = max(self.tokens_at[(r, m)], now) + self.clock.hop(0)
                self.eng.post(("out", r, m), now + self.msg, data)
        m = n + 1 - self.L
        if m >= 0 and self.decisions[m] is not None:
            data = yield ("recv", ("out", (r - 1) % p, m))
            self.tokens_at[(r, m)] = data
            return data
        return 0.0

    def rank(self, r: int) -> Generator[Any, Any, None]:
        p, L, d, eng = self.p, self.L, self.d, self.eng
        n = 0
        while self.n_total is None or n < self.n_total:
            # 1–2. ingest (rank 0 decides; others receive the request list, then replay)
            if r == 0:
                batch = self._decide(n, eng.now)
            else:
                yield ("recv", ("req", r - 1, n))
                batch = self.decisions[n]
            if r < p - 1:
                eng.post(("req", r, n), eng.now + self.msg)
            if self.iter_s:
                yield ("sleep", self.iter_s)
            if batch is not None:
                self.scheduled[(r, n)] = eng.now
            # 3. proxy metadata; the activations themselves are a GPU-stream wait
            act = 0.0
            if batch is not None and r > 0:
                act = yield ("recv", ("act", r - 1, n))
            # 4. output exchange before the launch when d > 0
            fence = 0.0
            if p > 1 and d > 0:
                fence = yield from self._exchange(r, n)
            # 5. launch on this rank's stream
            end = 0.0
            if batch is not None:
                start = max(eng.now, self.gpu_free[r], act, fence if self.coupling else 0.0)
                end = start + self._duration(r, batch)
                self.gpu_free[r] = end
                if r == p - 1:
                    self.last_end[n] = end
                b = batch
                self.forwards.append(
                    (r, n, n % L, n // L, b.kind, start, end, b.size, b.new_tokens, b.kv_after)
                )
            if p > 1 and d == 0:
                yield from self._exchange(r, n)
            # 6. block on slot i+1's tokens, then process them
            m = n + 1 - L
            if m >= 0 and self.decisions[m] is not None:
                if p == 1:
                    ready = self.last_end.pop(m)
                elif r == p - 1:
                    ready = self.tokens_at.pop((r, m))
                else:
                    ready = self.tokens_at[(r, m)]  # forwarded next iteration, then dropped
                if ready > eng.now:
                    yield ("until", ready)
                if self.overhead:
                    yield ("sleep", self.overhead)
                self.processed[(r, m)] = eng.now
                if r == 0:
                    self._process(self.decisions[m], eng.now)
            if r < p - 1 and p > 1 and (r, n - L) in self.tokens_at:
                del self.tokens_at[(r, n - L)]  # forwarded in step 4 of this iteration
            # 7. proxy metadata to the next stage (the tensors follow on the GPU stream)
            if batch is not None and r < p - 1:
                eng.post(("act", r, n), eng.now + self.msg, end + self.clock.hop(batch.new_tokens))
            n += 1

    def _process(self, batch: Batch | None, now: float) -> None:
        assert batch is not None
        finished = self.sched.complete(batch, now)
        made = sum(
            1
            for req, done in zip(batch.reqs, batch.done, strict=True)
            if batch.kind == "decode" or done
        )
        self.generated_at.extend([now] * made)
        for _ in finished:
            self._new_request(now)  # closed loop: a finished request is replaced at once

    def run(self) -> None:
        for _ in range(self.workload.concurrency):
            self._new_request(0.0)
        for r in range(self.p):
            self.eng.spawn(self.rank(r))
        budget = (
            64
            * self.p
            * ((self.steps or 0) + 4 * self.L + 16 + int((self.duration_s or 0.0) * 1e5))
        )
        self.eng.run(max_events=min(max(budget, 100_000), 50_000_000))


def _jittered(value: int, jitter: float, rng: random.Random) -> int:
    if not jitter:
        return value
    return max(1, round(value * (1.0 + rng.uniform(-jitter, jitter))))


def simulate(
    layout: Layout,
    workload: Workload,
    params: Params,
    *,
    steps: int | None = None,
    duration_s: float | None = None,
    seed: int = 0,
    relay_coupling: bool = False,
    message_s: float = 0.0,
    iteration_s: float = 0.0,
    jitter: float = 0.0,
    warmup_rounds: int = 2,
) -> Simulation:
    """Simulate the PP loop for ``steps`` rank-0 iterations or ``duration_s`` seconds.

    A burst of ``concurrency`` requests arrives at t = 0; each finished request is replaced at
    once (closed loop) until ``workload.num_requests`` have been sent. Deterministic for a seed.

    Parameters
    ----------
    steps, duration_s
        When rank 0 stops scheduling (default 64 rounds of ``pp_loop_size`` iterations); the
        loop then drains so every launched batch is processed.
    relay_coupling
        Slot i's forward waits for the receive of slot i+1's tokens posted before it
        (communication on the scheduler stream with ``d > 0``; inferred).
    message_s, iteration_s
        CPU latency of one gloo message and CPU time of one loop iteration (both 0 in the
        closed form).
    jitter
        Forward times vary uniformly by ±jitter (seeded).
    warmup_rounds
        Rounds skipped at least at the start of the steady window (which is the later half of
        the longest stretch without prefill).
    """
    if steps is None and duration_s is None:
        steps = 64 * layout.loop_size
    if layout.dp > 1:
        raise ToolkitError("simulate: one data-parallel replica at a time (dp must be 1)")
    loop = _Loop(
        layout,
        workload,
        params,
        steps=steps,
        duration_s=duration_s,
        seed=seed,
        relay_coupling=relay_coupling,
        message_s=message_s,
        iteration_s=iteration_s,
        jitter=jitter,
    )
    loop.run()
    forwards = pl.DataFrame(loop.forwards, schema=SIM_FORWARDS, orient="row").sort(
        "start_s", "pp_rank", "iteration"
    )
    batches = batch_table(loop.decisions, loop.scheduled, loop.processed, loop.p)
    requests = pl.DataFrame(
        [
            (
                q.rid,
                q.slot,
                q.input_len,
                q.output_len,
                q.generated,
                q.arrival_s,
                nan_none(q.admitted_s),
                nan_none(q.first_token_s),
                nan_none(q.finished_s),
            )
            for q in loop.requests
        ],
        schema=SIM_REQUESTS,
        orient="row",
    )
    summary = steady_summary(
        loop.decisions,
        loop.generated_at,
        forwards,
        loop_size=loop.L,
        stages=loop.p,
        warmup_rounds=warmup_rounds,
    )
    return Simulation(layout, workload, params, forwards, batches, requests, summary)
