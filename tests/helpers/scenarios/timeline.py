"""Play the benchmark phases against the machine, one scheduler round at a time.

A round visits every slot once, in turn (one batch under TP). On its turn a slot either runs a
prefill pass, when requests wait and the slot has room (its decode skips this round, as in
SGLang), or one decode step. The passes of a round come first (under PP they overlap: each
further pass adds the slowest stage's share of it); the decode steps then take ``T`` from
``Machine.round_ms`` for the slots that decode, each slot finishing ``T/n`` after the previous.
A steady round is the formula; each round scatters ±3 % around it (zero mean, seeded by the
scenario name) so that logs are not flat. What the log, the benchmark and the GPU trace show
is read off this one clock.

The client is ``sglang.bench_serving --max-concurrency c``: ``c`` requests at once, each
finished request replaced by the next until ``num_prompts`` are done. With
``--random-range-ratio r < 1`` (``Scenario.range_ratio``) each request's ISL and OSL are drawn
uniformly from ``[max(int(r·len), 1), len]``, as ``bench_serving`` does; with ``Scenario.warmup``
each phase is preceded by its single-request test run (``min(OSL, warmup)`` tokens, not in the
results) and the client's 1 s sleep. A request's first token
comes from its prefill pass, then one token per decode step of its slot. ``#token`` counts
``ISL + generated`` per running request plus the prompt tokens of a request split so far.

KV pool (it binds only in the pressure scenarios): a request is admitted when the tokens in
use, plus ``new_token_ratio`` × the output still to come of every running request and of the
candidate, plus its prompt, fit the pool; the ratio starts at 0.7 and falls by 0.001 a round
to 0.1. When a decode step would not fit, requests with the fewest generated tokens are
retracted until it does; they wait again and re-prefill ``ISL + generated`` tokens later, and
the ratio becomes ``(generated + 20·n) / output lengths`` of the requests that stay (≤ 1).
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field

from helpers.scenarios.machine import Layout, fill_pass
from helpers.scenarios.spec import Phase, Scenario

__all__ = ["Event", "PhaseRun", "Request", "Segment", "Timeline", "forget", "play"]

DECODE_LOG_INTERVAL = 40  # SGLang's default; ``Scenario.decode_log_interval`` sets it
RATIO_INIT, RATIO_MIN, RATIO_DECAY, RETRACT_STEPS = 0.7, 0.1, 0.001, 20
JITTER = 0.03
WARMUP_STEPS = 7  # the server's own warm-up request before it reports ready
CLIENT_SLEEP_MS = 1000.0  # bench_serving sleeps this long after its test run
MERGE_MS = 50.0  # GPU busy is kept at this resolution (nvidia-smi samples ≥ 100 ms)


@dataclass(slots=True, eq=False)
class Request:
    isl: int
    osl: int
    arrival: float
    done: int = 0  # prompt tokens of the current prefill already in KV
    gen0: int = 0  # tokens generated when it joined its slot (or all, while waiting)
    joined: int = 0  # its slot's step count when it joined
    slot: Slot | None = None
    first_token: float | None = None
    last_token: float = 0.0  # time of its latest token while it is not decoding with a slot
    finish: float | None = None

    @property
    def generated(self) -> int:
        return self.gen0 if self.slot is None else self.gen0 + self.slot.steps - self.joined

    @property
    def left(self) -> int:
        """Prompt tokens a prefill still has to process (output kept across a retraction)."""
        return self.isl + self.gen0 - self.done


@dataclass(slots=True, eq=False)
class Slot:
    """One micro-batch slot: its requests decode together, one token per step."""

    reqs: list[Request] = field(default_factory=list)
    steps: int = 0
    last: float = 0.0  # time of its latest step
    fresh: list[Request] = field(default_factory=list)  # joined since that step
    due: dict[int, list[Request]] = field(default_factory=dict)  # step count → finishing

    def add(self, r: Request) -> None:
        r.slot, r.joined = self, self.steps
        self.reqs.append(r)
        self.fresh.append(r)
        self.due.setdefault(self.steps + r.osl - r.gen0, []).append(r)

    def remove(self, r: Request) -> None:
        r.gen0 = r.generated
        if r not in self.fresh:
            r.last_token = self.last
        else:
            self.fresh.remove(r)
        finishing = self.due.get(self.steps + r.osl - r.gen0)
        if finishing and r in finishing:
            finishing.remove(r)
        self.reqs.remove(r)
        r.slot = None


@dataclass(frozen=True)
class Event:
    """Something the server writes at time ``t`` (ms after it reported ready)."""

    t: float
    kind: str  # "prefill", "decode", "retract", "access"
    fields: dict


@dataclass(frozen=True)
class Segment:
    """From ``t0`` to ``t1`` (ms) the GPUs of stage s were busy ``busy[s]`` of the time."""

    t0: float
    t1: float
    busy: tuple[float, ...]


@dataclass
class PhaseRun:
    phase: Phase
    start: float
    end: float = 0.0
    requests: list[Request] = field(default_factory=list)
    itl: list[tuple[float, int]] = field(default_factory=list)  # (gap ms, how many tokens)
    tokens_at: dict[int, int] = field(default_factory=dict)  # output tokens per second
    prefill_ms: float = 0.0  # wall time in prefill passes (no decode step runs meanwhile)
    finished: int = 0
    retractions: int = 0
    max_queue: int = 0  # requests waiting while a decode step ran
    max_usage: float = 0.0
    decode_steps: int = 0
    eager_steps: int = 0

    @property
    def duration_ms(self) -> float:
        return self.end - self.start

    @property
    def tok_s(self) -> float:
        """What ``bench_serving`` reports as output throughput."""
        return 1000.0 * sum(r.osl for r in self.requests) / self.duration_ms


@dataclass
class Timeline:
    events: list[Event] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    phases: list[PhaseRun] = field(default_factory=list)


class _Server:
    """The scheduler state that outlives a phase, and the counters behind the log lines."""

    def __init__(self, sc: Scenario, lay: Layout) -> None:
        self.sc, self.lay, self.m = sc, lay, sc.machine
        self.cap, self.max_running = sc.launch.slot_cap, sc.launch.mrr_resolved
        self.pool, self.graph_max = sc.launch.pool, sc.launch.graph_max
        self.slots = [Slot() for _ in range(lay.slots)]
        self.queue: deque[Request] = deque()
        self.running = 0
        self.kv = 0  # Σ ISL + generated over running requests
        self.to_come = 0  # Σ output still to come over running requests
        self.ratio = RATIO_INIT
        self.forward_ct = self.decode_tokens = WARMUP_STEPS
        self.decode_tic = self.prefill_tic = 0.0
        self.prefill_tokens = 0
        self.tl = Timeline()
        self.rounds: dict[tuple[int, ...], tuple[float, list[float]]] = {}
        self.rng = random.Random(sc.name)
        self.lengths = random.Random(f"{sc.name}/lengths")  # only drawn from when r < 1
        self.interval = sc.decode_log_interval
        self.port = 40000 + sum(map(ord, sc.name)) * 7 % 20000

    # -- state -----------------------------------------------------------------------------
    def used(self) -> int:
        return self.kv + (self.queue[0].done if self.queue else 0)

    def waiting(self) -> int:
        """``#queue-req``: the waiting queue, without a request that is being split."""
        return len(self.queue) - (1 if self.queue and self.queue[0].done else 0)

    def emit(self, t: float, kind: str, **fields: object) -> None:
        self.tl.events.append(Event(t, kind, fields))

    def busy(self, t0: float, t1: float, busy: list[float] | tuple[float, ...]) -> None:
        """Record GPU busy shares; a segment that continues the last one is merged into it
        (time-weighted), which keeps the trace's integral and the list short."""
        if t1 <= t0:
            return
        segs = self.tl.segments
        if segs and abs(segs[-1].t1 - t0) < 1e-9 and t1 - segs[-1].t0 < MERGE_MS:
            last = segs[-1]
            w0, w1 = last.t1 - last.t0, t1 - t0
            busy = tuple(
                (a * w0 + b * w1) / (w0 + w1) for a, b in zip(last.busy, busy, strict=True)
            )
            segs[-1] = Segment(last.t0, t1, busy)
        else:
            segs.append(Segment(t0, t1, tuple(busy)))

    def join(self, slot: Slot, r: Request) -> None:
        slot.add(r)
        self.running += 1
        self.kv += r.isl + r.gen0
        self.to_come += r.osl - r.gen0

    def leave(self, r: Request) -> None:
        gen = r.generated
        self.running -= 1
        self.kv -= r.isl + gen
        self.to_come -= r.osl - gen
        r.slot.remove(r)

    # -- requests --------------------------------------------------------------------------
    def send(self, run: PhaseRun, t: float, exact: bool = False) -> None:
        """The client sends the phase's next request; ``exact``: at the phase's own lengths
        (the test run repeats one prompt, whatever the range ratio)."""
        ph, ratio = run.phase, self.sc.range_ratio
        if ratio < 1.0 and not exact:
            isl = self.lengths.randint(max(int(ph.isl * ratio), 1), ph.isl)
            osl = self.lengths.randint(max(int(ph.osl * ratio), 2), ph.osl)
        else:
            isl, osl = ph.isl, ph.osl
        r = Request(isl, osl, t)
        run.requests.append(r)
        self.queue.append(r)
        self.port = 32768 + (self.port * 1103 + 12345) % 28000
        self.emit(t, "access", port=self.port)

    # -- one prefill pass -------------------------------------------------------------------
    def prefill(self, run: PhaseRun, i: int, t: float) -> float:
        """Admit into slot ``i`` with a pass starting at ``t``; returns its length (ms) or 0."""
        slot = self.slots[i]
        room = min(self.cap - len(slot.reqs), self.max_running - self.running)
        if not self.queue or room <= 0:
            return 0.0
        charged = self.used() + self.ratio * self.to_come

        def fits(j: int) -> bool:
            nonlocal charged
            r = self.queue[j]
            cost = r.left + self.ratio * (r.osl - r.gen0)
            if charged + cost > self.pool:
                return False
            charged += cost
            return True

        taken = fill_pass((r.left for r in self.queue), self.sc.launch.chunk, room, fits)
        if not taken:
            return 0.0
        tokens = sum(n for _, n in taken)
        usage = self.used() / self.pool
        landed = 0
        for j, n in taken:
            self.queue[j].done += n
            landed += self.queue[j].left == 0
        admitted = [self.queue.popleft() for _ in range(landed)]
        self.prefill_tokens += tokens
        self.emit(
            t,
            "prefill",
            new_seq=len(taken),
            new_token=tokens,
            usage=usage,
            running=len(slot.reqs),
            queue=self.waiting(),
            pending=sum(r.left for r in self.queue if not r.done),
            input_tput=1000.0 * self.prefill_tokens / max(t - self.prefill_tic, 1e-3),
        )
        self.prefill_tic, self.prefill_tokens = t, 0
        trip = self.m.prefill_ms(self.lay, tokens)
        end = t + trip
        for r in admitted:
            r.done = 0
            r.gen0 += 1  # the prefill pass samples a token
            if r.first_token is None:
                r.first_token = end
            else:
                run.itl.append((end - r.last_token, 1))
            r.last_token = end
            run.tokens_at[int(end // 1000)] = run.tokens_at.get(int(end // 1000), 0) + 1
            if r.gen0 >= r.osl:  # retracted just before its last token: done now
                r.finish = end
                run.finished += 1
            else:
                self.join(slot, r)
        return trip

    # -- retraction -------------------------------------------------------------------------
    def retract(self, run: PhaseRun, decoders: list[Slot], t: float) -> None:
        need = sum(len(s.reqs) for s in decoders)
        if self.used() + need <= self.pool:
            return
        victims = sorted(
            (r for s in decoders for r in s.reqs), key=lambda r: (r.generated, -r.arrival)
        )
        out = []
        while victims and (not out or self.used() + need > self.pool):
            r = victims.pop(0)
            self.leave(r)
            out.append(r)
            need -= 1
        stay = [r for s in decoders for r in s.reqs]
        old = self.ratio
        if stay:
            decoded = sum(r.generated for r in stay) + RETRACT_STEPS * len(stay)
            self.ratio = min(1.0, decoded / sum(r.osl for r in stay))
        self.queue.extend(out)
        run.retractions += 1
        self.emit(t, "retract", n=len(out), old=old, new=self.ratio)

    # -- one round ------------------------------------------------------------------------
    def round(self, run: PhaseRun, now: float) -> float:
        """Play one round from ``now``; returns its end."""
        lay, m = self.lay, self.m
        offset = pf = kernel = 0.0
        prefilled = set()
        for i in range(lay.slots if self.queue else 0):
            trip = self.prefill(run, i, now + offset)
            if trip:
                prefilled.add(i)
                pf = max(pf, offset + trip)
                kernel += trip - m.hops_ms(lay)
                # The next pass enters stage 0 once the slowest stage is done with this one.
                offset += trip * max(lay.split) / lay.layers if lay.pp > 1 else trip
        if pf:
            # Stage s does its share n_s / L of every pass; a pass's hops are idle.
            self.busy(now, now + pf, [kernel * n / lay.layers / pf for n in lay.split])
            run.prefill_ms += pf
        t = now + pf
        decoders = [s for i, s in enumerate(self.slots) if s.reqs and i not in prefilled]
        if decoders:
            self.retract(run, decoders, t)
            decoders = [s for s in decoders if s.reqs]
        if not decoders:
            return t
        run.max_queue = max(run.max_queue, self.waiting())
        sizes = tuple(len(s.reqs) for s in decoders)
        if sizes not in self.rounds:
            self.rounds[sizes] = (
                m.round_ms(lay, sizes, self.graph_max),
                m.busy(lay, sizes, self.graph_max),
            )
        mean, busy = self.rounds[sizes]
        big = mean * (1 + JITTER * self.rng.uniform(-1.0, 1.0))
        self.busy(t, t + big, [min(b * mean / big, 1.0) for b in busy])
        finished: list[Request] = []
        for j, slot in enumerate(decoders):
            at = t + big * (j + 1) / len(decoders)
            n = len(slot.reqs)
            old = n - len(slot.fresh)
            if old:
                run.itl.append((at - slot.last, old))
            run.itl.extend((at - r.last_token, 1) for r in slot.fresh)
            slot.fresh.clear()
            slot.steps += 1
            slot.last = at
            self.kv += n
            self.to_come -= n
            run.tokens_at[int(at // 1000)] = run.tokens_at.get(int(at // 1000), 0) + n
            for r in slot.due.pop(slot.steps, []):
                r.finish = at
                finished.append(r)
            self.forward_ct += 1
            self.decode_tokens += n
            run.decode_steps += 1
            run.eager_steps += n > self.graph_max
            used = self.used()
            if self.forward_ct % self.interval == 0:
                self.emit(
                    at,
                    "decode",
                    running=n,
                    token=used,
                    usage=used / self.pool,
                    graph=n <= self.graph_max,
                    gen_tput=1000.0 * self.decode_tokens / max(at - self.decode_tic, 1e-3),
                    queue=self.waiting(),
                )
                self.decode_tic, self.decode_tokens = at, 0
            run.max_usage = max(run.max_usage, used / self.pool)
        self.ratio = max(RATIO_MIN, self.ratio - RATIO_DECAY)
        run.finished += len(finished)
        for r in finished:
            self.leave(r)
            if len(run.requests) < run.phase.num_prompts:
                self.send(run, r.finish)
        return t + big

    def phase(self, ph: Phase, start: float, lengths: bool = True) -> PhaseRun:
        """Play one phase from ``start``; ``lengths=False`` sends its lengths as they are
        (the test run repeats the first prompt, whatever the range ratio)."""
        run = PhaseRun(ph, start)
        for _ in range(min(ph.c, ph.num_prompts)):
            self.send(run, start, exact=not lengths)
        now = start
        while run.finished < ph.num_prompts:
            end = self.round(run, now)
            if end == now:
                raise RuntimeError(f"{self.sc.name}: phase c={ph.c} makes no progress")
            now = end
        run.end = max(r.finish for r in run.requests)
        return run


def play(sc: Scenario) -> Timeline:
    """The benchmark session; times are ms after the server reported ready.

    Deterministic, so it is computed once per scenario spec (treat the result as read-only).
    """
    key = (
        sc.name,
        sc.version,
        sc.model,
        sc.launch,
        sc.machine,
        sc.phases,
        sc.gap_s,
        sc.decode_log_interval,
        sc.range_ratio,
        sc.warmup,
    )
    if key not in _PLAYED:
        _PLAYED[key] = _play(sc)
    return _PLAYED[key]


_PLAYED: dict[tuple, Timeline] = {}


def forget(name: str) -> None:
    """Drop the sessions played for scenarios named ``name`` (a generator that plays many
    variants of a run keeps memory flat this way)."""
    for key in [k for k in _PLAYED if k[0] == name]:
        del _PLAYED[key]


def _play(sc: Scenario) -> Timeline:
    server = _Server(sc, sc.layout)
    now = 1000.0 * sc.gap_s
    for ph in sc.phases:
        if sc.warmup:  # the test run: one request, then the client sleeps
            test = Phase(1, 1, ph.isl, min(ph.osl, sc.warmup))
            now = server.phase(test, now, lengths=False).end + CLIENT_SLEEP_MS
        run = server.phase(ph, now)
        server.tl.phases.append(run)
        now = math.ceil((run.end + 1000.0 * sc.gap_s) / 1000.0) * 1000.0
    return server.tl
