"""``--tune``: try loader configurations on the user's real step and keep
the fastest, without changing the data.

Every pass of the tuned loader draws what the untouched pass would, in the
same order: the sampler's iterator and the base seed (from the loader's
generator, or the global RNG without one; not on later passes of a loader
with persistent workers, whose iterator is only reset).  The batches of
indices then come from that one sampler iterator, the *feed*, whatever
configuration loads them: in the training process (the configuration as
written without workers) or through a private DataLoader over the same
dataset whose batch sampler is the feed and whose generator is its own (so
its workers' seeds draw nothing from the user's RNG).  Configurations are
swapped between batches: the outgoing one stops pulling from the feed and
delivers what it already pulled, in order, before the next one starts.  If
anything fails, the indices pulled but not delivered go back to the front
of the feed and the configuration as written loads them.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any

from loadlint.monitor.instrument import CONFIG_KEYS, MULTI, SINGLE, LoaderLog, Monitor, config_text
from loadlint.monitor.runners import END, Feed, InProcess, Shadow, TunedIter
from loadlint.monitor.windows import CANDIDATE_S, MIN_BATCHES, WINDOW_S, amortized, window_done
from loadlint.verify import measure

#: A point measured once within this factor of the fastest gets a second
#: round before the leader is chosen.
NEAR = 1.25
#: Rounds (a window as written and a candidate's, in alternating order) per
#: point of the search; the leader gets more in the proof.
PROBE_ROUNDS = 1
#: The proof stops at a verdict or after this many rounds of the leader.
PROOF_ROUNDS = 8
#: Workers per usable CPU at most (a waiting loader's useful count is set
#: by its wait, not the CPUs), and at most MAX_WORKERS.
WORKERS_PER_CPU = 16
MAX_WORKERS = 64
#: A point is better when its ratio rises by this much.
RISE = 1.05
#: A loader whose loading keeps less of a CPU busy than this waits (I/O).
WAITING = 0.5
class Tuner:
    def __init__(self, torch: Any, monitor: Monitor, loader: Any, log: LoaderLog, usable: int) -> None:
        self.torch, self.monitor, self.loader, self.log = torch, monitor, loader, log
        self.usable = max(1, usable)
        self.written = {key: log.config.get(key) for key in CONFIG_KEYS}
        self.written_runner_name = MULTI if self.written.get("num_workers") else SINGLE
        self.configs: list[dict[str, Any]] = [self.written]
        self.runners: dict[int, Any] = {}
        self.pairs: dict[int, list[tuple[float, float]]] = {}
        self.windows: list[dict[str, Any]] = []
        self.queue: deque[int] = deque()
        self.state = "tuning"
        self.phase = "look"
        self.final = 0
        self.leader: int | None = None
        self.decision: measure.Decision | None = None
        self.failed: str | None = None
        self.passes = 0
        self.feed = Feed(iter(()))
        self.base_seed: int | None = None
        self.current: Any = None
        self.current_id = 0
        self.draining: Any = None
        self.window: dict[str, Any] | None = None
        self.busy: float | None = None
        self.probed: dict[int, int] = {}
        self.bisected = False
        self.tuned_at: float | None = None
        self.started_at = monitor.clock()
        self.pending_round: list[int] = []
        #: Seconds from a fresh start of a configuration's workers to its first batch.
        self.first_batch: dict[int, float] = {}
        self.starting: tuple[int, float] | None = None

    # -- the passes ------------------------------------------------------

    def iterator(self) -> TunedIter | None:
        loader = self.loader
        persistent = bool(self.written.get("persistent_workers")) and bool(self.written.get("num_workers"))
        if self.state != "tuning" and self.final == 0 and not persistent:
            # As written from here on: the loader's own iterator draws what ours would.
            return None
        sampler_iter = iter(loader._index_sampler)
        if not (persistent and self.passes):
            self.base_seed = int(self.torch.empty((), dtype=self.torch.int64).random_(generator=loader.generator).item())
        self.passes += 1
        if self.draining is not None or isinstance(self.current, Shadow):
            # The last pass was left early: its loader restarts on the new
            # feed (a reset drops the tasks in flight, as torch's own does).
            self.draining, self.current = None, None
            self._pass_ended()
        self.feed = Feed(sampler_iter)
        if self.written.get("num_workers"):
            self.feed.prime()
        return TunedIter(self)

    def next_batch(self) -> Any:
        while True:
            self.fetching: Any = None
            try:
                got = self._step()
            except StopIteration:
                raise
            except Exception as exc:
                # Loading in this process is what the untouched run does:
                # its errors are the script's own.  Anything else is ours.
                if isinstance(self.fetching, InProcess):
                    raise
                self.fail(exc)
                continue
            if got is END:
                continue
            if self.fetching is self.draining:
                return got  # a swap's leftovers belong to no window
            if self.starting is not None and self.fetching is self.current:
                cid, began = self.starting
                self.first_batch.setdefault(cid, time.perf_counter() - began)
                self.starting = None
            try:
                self._count()
            except Exception as exc:
                self.fail(exc)
            return got

    def _step(self) -> Any:
        if self.draining is not None:
            self.fetching = self.draining
            got = self.draining.next(self.feed)
            if got is END:
                self.draining = None
                self.feed.stopping = False
                if self.feed.done:
                    raise StopIteration
                return END
            self.log.current_config = -1
            return got
        if self.current is None:
            self._begin()
        self.fetching = self.current
        try:
            got = self.current.next(self.feed)
        except StopIteration:
            self._pass_ended()
            raise
        if got is END:
            # A private loader ends only when the feed does.
            self.current = None
            self._pass_ended()
            raise StopIteration
        self.log.current_config = self.current_id
        return got

    def _pass_ended(self) -> None:
        """A window goes on over the next pass: the time between passes
        (the script's own work, a new pass starting) is not counted."""
        if self.window is not None:
            self.window["last"] = None
            # A feed stopped early ended with the pass; the new pass's feed runs.
            self.window["stopped"] = False

    # -- windows -----------------------------------------------------------

    def runner(self, cid: int) -> Any:
        """The configuration's runner.  Configurations that differ only in
        ``prefetch_factor`` share their workers: the depth is read at each
        dispatch, so setting it on the live iterator is that configuration."""
        if cid not in self.runners:
            config = self.configs[cid]
            same = next((r for c, r in self.runners.items() if isinstance(r, Shadow) and r.shares(config)), None)
            self.runners[cid] = same or (Shadow(self.torch, self, config) if config.get("num_workers")
                                         else InProcess(self.torch, self.loader))
        runner = self.runners[cid]
        if isinstance(runner, Shadow):
            runner.depth(self.configs[cid])
        return runner

    def _new_window(self, cid: int) -> dict[str, Any]:
        runner = self.runners.get(cid)
        return {"config": cid, "n": 0, "elapsed": 0.0, "last": None, "warm": 0,
                "workers": int(self.configs[cid].get("num_workers") or 0),
                "cpu": getattr(runner, "cpu", 0.0), "wall": getattr(runner, "wall", 0.0)}

    def _begin(self) -> None:
        if self.window is not None:
            cid = self.window["config"]  # a window not begun, or left unfinished by the last pass
        elif self.state == "tuning":
            cid = self.queue.popleft() if self.queue else self.current_id
        else:
            cid = self.final
        keep = [self.runners.get(c) for c in (cid, self._best()) if c is not None]
        for other in [c for c, r in self.runners.items() if isinstance(r, Shadow) and not any(r is k for k in keep)]:
            # Only the leader's workers wait for their next window.
            runner = self.runners.pop(other)
            if not any(r is runner for r in self.runners.values()):
                runner.close()
        self.current_id = cid
        self.current = self.runner(cid)
        began = time.perf_counter()
        self.current.start()
        self.starting = (cid, began) if isinstance(self.current, Shadow) and self.current.fresh else None
        if self.state == "tuning" and self.window is None:
            self.window = self._new_window(cid)
        if self.window is not None:
            # In order, batch k comes from worker k mod num_workers: after
            # num_workers batches every worker has started (half, when they
            # were started for an earlier window and only refill).
            workers = int(self.configs[cid].get("num_workers") or 0)
            self.window["warm"] = workers if self.current.fresh else workers // 2

    def _count(self) -> None:
        if self.state != "tuning" or self.window is None:
            return
        w = self.window
        now = time.perf_counter()
        gap = None if w["last"] is None else now - w["last"]
        w["last"] = now
        if gap is None:
            return
        if w["warm"] > 0:
            # Workers just (re)started fill their pipeline first.
            w["warm"] -= 1
            return
        w["n"] += 1
        w["elapsed"] += gap
        if w.get("stopped"):
            if self.feed.outstanding:
                return  # the batches in flight still arrive, in the window
        elif self._stop_early(w) or not window_done(w):
            return
        rate = w["n"] / w["elapsed"]
        record = {"config": w["config"], "batches": w["n"], "seconds": round(w["elapsed"], 4),
                  "batches_per_s": round(rate, 3), "at_s": round(self.monitor.clock(), 3)}
        if isinstance(self.current, InProcess) and self.current.wall > w["wall"]:
            record["busy"] = round((self.current.cpu - w["cpu"]) / (self.current.wall - w["wall"]), 3)
        self.windows.append(record)
        self._after_window(record)
        nxt = self.queue[0] if self.state == "tuning" and self.queue else self.final
        if w.get("stopped"):
            # The workers delivered all they held: whatever comes next starts them again.
            self._swap()
        elif nxt != self.current_id and isinstance(self.current, Shadow) and self.current.deepens(self.configs[nxt]):
            # The same workers, deeper: no swap (a shallower depth waits for
            # a swap: torch asserts that the tasks in flight fit it).
            self.runner(nxt)
            self.current_id = nxt
            if self.state == "tuning":
                self.queue.popleft()
                self.window = self._new_window(nxt)
                self.window["last"] = now
                self.window["warm"] = self.window["workers"] // 2
            else:
                self.window = None
        elif nxt != self.current_id:
            self._swap()
        elif self.state == "tuning":
            self.queue.popleft()
            self.window = self._new_window(nxt)
            self.window["last"] = now
        else:
            self.window = None

    def _stop_early(self, w: dict[str, Any]) -> bool:
        """Workers hold up to prefetch_factor x num_workers batches in flight,
        which a swap delivers uncounted.  Where those complete the window
        (whole rounds, and long enough at the rate so far), the feed stops
        now and the window ends on the last of them: the same work, fewer
        batches of the run spent on the search."""
        workers = int(w["workers"])
        if not workers or not isinstance(self.current, Shadow) or (self.queue and self.queue[0] == w["config"]):
            return False  # no workers, or the same ones go on: nothing to drain
        held = len(self.feed.outstanding)
        total = int(w["n"]) + held
        least = WINDOW_S if w["config"] == 0 else CANDIDATE_S
        if not held or total < max(MIN_BATCHES, workers) or total % workers or float(w["elapsed"]) * total / int(w["n"]) < least:
            return False
        self.feed.stopping = True
        w["stopped"] = True
        return True

    def _swap(self) -> None:
        outgoing, self.current, self.window = self.current, None, None
        if self.state == "tuning" and self.queue:
            self.window = self._new_window(self.queue.popleft())
        if isinstance(outgoing, Shadow):
            self.feed.stopping = True
            self.draining = outgoing

    # -- the search --------------------------------------------------------

    def _after_window(self, record: dict[str, Any]) -> None:
        if self.phase == "look":
            # The run's first window only says how busy loading keeps the
            # process: a run's start (imports, cold caches, the monitor's own
            # start) is no steady rate to pair with.
            self.busy = record.get("busy")
            self.phase = "workers"
        else:
            self.pending_round.append(len(self.windows) - 1)
        if len(self.pending_round) == 2:
            a, b = (self.windows[i] for i in self.pending_round)
            written, other = (a, b) if a["config"] == 0 else (b, a)
            self.pairs.setdefault(other["config"], []).append((written["batches_per_s"], other["batches_per_s"]))
            self.pending_round = []
        if not self.queue:
            self._plan()

    def _ratio(self, cid: int) -> float:
        """The median paired ratio to the configuration as written, over a
        horizon that pays the workers' start."""
        if cid == 0:
            return 1.0
        pairs = self.pairs.get(cid) or []
        return measure.median([b / a for a, b in pairs if a > 0]) * self._amortized(cid) if pairs else 0.0

    def _start_seconds(self, cid: int) -> float | None:
        """Time to the first batch of a fresh start; a deeper prefetch on the
        same workers has the start of the configuration that started them."""
        config = self.configs[cid]
        same = [c for c in self.first_batch if self.configs[c].get("num_workers") == config.get("num_workers")
                and bool(self.configs[c].get("pin_memory")) == bool(config.get("pin_memory"))]
        return self.first_batch.get(cid, self.first_batch[same[0]] if same else None)

    def _amortized(self, cid: int) -> float:
        """Its workers' start, paid again by every run that applies it, over
        a pass or the run so far when longer (the rest is not known)."""
        took = self._start_seconds(cid)
        rates = [w["batches_per_s"] for w in self.windows if w["config"] == cid]
        if took is None or not rates:
            return 1.0
        try:
            per_pass = len(self.loader)
        except TypeError:
            per_pass = 0
        return amortized(took, int(self.configs[cid].get("num_workers") or 0), measure.median(rates), max(per_pass, self.log.batches))

    def _probe(self, config: dict[str, Any], rounds: int = PROBE_ROUNDS) -> int | None:
        config = {**self.written, **config}
        if config == self.written:
            return None
        if config in self.configs:
            cid = self.configs.index(config)
        else:
            self.configs.append(config)
            cid = len(self.configs) - 1
        for r in range(rounds):
            if r == 0 and self.pending_round:
                self.queue.append(cid)  # the round a window as written opened
                continue
            done = len(self.pairs.get(cid, [])) + r
            self.queue.extend((0, cid) if done % 2 == 0 else (cid, 0))
        return cid

    def _workers(self, nw: int) -> int | None:
        if nw in self.probed or nw < 1 or nw > min(MAX_WORKERS, WORKERS_PER_CPU * self.usable) or not self._room(nw):
            return None
        if nw > 2 * self.usable and not self._waiting():
            return None  # CPU-bound workers past the CPUs only take turns
        cid = self._probe({"num_workers": nw, "persistent_workers": True, "prefetch_factor": 2})
        self.probed[nw] = cid or 0
        return cid

    def _room(self, nw: int) -> bool:
        """The workers fit in half the free memory and half of /dev/shm."""
        try:
            import psutil

            free = psutil.virtual_memory().available
        except Exception:
            return True
        samples = [m for m in self.monitor.memory if m.get("workers")]
        per_worker = samples[-1]["worker_uss"] / samples[-1]["workers"] if samples else 64 << 20
        if nw * per_worker > free / 2:
            return False
        sizes = sorted(self.log.batch_bytes)
        batch = sizes[len(sizes) // 2] if sizes else 0
        try:
            import os

            st = os.statvfs("/dev/shm")
            shm_free = st.f_bavail * st.f_frsize
        except OSError:
            return True
        return nw * 2 * batch <= shm_free / 2

    def _plan(self) -> None:
        if self.phase == "workers":
            if self.probed:
                if self._climb_more():
                    return
                self.phase = "prefetch"
            else:
                start = max(8, 4 * self.usable) if self._waiting() else self.usable
                if self._workers(start) is None:
                    self.phase = "prefetch"
                else:
                    return
        if self.phase == "prefetch":
            if self._recheck():
                return  # the depth is tried on the leader, not on a lucky neighbour
            self.phase = "pin"
            best = self._best()
            # A deeper queue covers the wait of workers that wait on storage;
            # CPU-bound workers are bound by the CPUs, whatever the depth.
            if best is not None and self.configs[best].get("num_workers") and self._waiting():
                config = dict(self.configs[best], prefetch_factor=4)
                if config not in self.configs:
                    self._probe(config)
                    return
        if self.phase == "pin":
            self.phase = "proof"
            best = self._best()
            # Pinned batches only pay where the script copies them to a GPU
            # from pageable memory (the copy timer saw it).
            pageable = any(not pinned for _, _, pinned, _, _ in self.monitor.copies)
            if best is not None and pageable and not self.configs[best].get("pin_memory"):
                self._probe(dict(self.configs[best], pin_memory=True))
                return
        if self.phase == "proof":
            if self.leader is None and self._recheck():
                return
            best = self._best()
            if best is None or self._ratio(best) <= 1.0:
                self._finish(best)
                return
            self.leader = best
            current = [measure.Run(i, a) for i, (a, _) in enumerate(self.pairs[best])]
            candidate = [measure.Run(i, b) for i, (_, b) in enumerate(self.pairs[best])]
            self.decision = measure.decide(current, candidate)
            if self.decision.verdict in ("confirmed", "refuted") or len(self.pairs[best]) >= PROOF_ROUNDS:
                self._finish(best)
            else:
                self._probe(self.configs[best], rounds=1)

    def _climb_more(self) -> bool:
        """Doubling while the rate rises (a waiting loader); a CPU-bound one
        also tries half.  Then one point between the best and its better neighbour."""
        tried = sorted(self.probed)
        ratios = {nw: self._ratio(cid) for nw, cid in self.probed.items()}
        best = max(ratios, key=lambda k: ratios[k])
        top = tried[-1]
        if best == top and (len(tried) == 1 or ratios[top] >= RISE * max(r for n, r in ratios.items() if n != top)):
            if self._workers(2 * top) is not None:
                return True
        low = tried[0]
        if best == low and low > 1 and self._workers(max(1, low // 2)) is not None:
            return True
        # Between the best and a neighbour that measured worse; at the top
        # of the climb (the cap, or out of room) there is none above.
        neighbours = [n for n in tried if n != best and (n > best or best != top)]
        if neighbours and not self.bisected:
            near = min(neighbours, key=lambda n: (abs(n - best), -ratios[n]))
            mid = (best + near) // 2
            if mid not in (best, near) and abs(best - near) > 2 and self._workers(mid) is not None:
                self.bisected = True
                return True
        return False

    def _waiting(self) -> bool:
        busy = self._busy()
        return busy is not None and busy < WAITING

    def _busy(self) -> float | None:
        """How busy loading keeps the process: the median over the windows
        as written after the first, once there are some (the first can fall
        on cold files and look like a wait: a JPEG folder was once searched
        up to 16 workers on 2 CPUs)."""
        later = [w["busy"] for w in self.windows[1:] if w["config"] == 0 and w.get("busy") is not None]
        return measure.median(later) if later else self.busy

    def _recheck(self) -> bool:
        """Points measured once near the fastest get a second round before
        the leader is chosen: one pair of short windows on a busy machine
        can put the wrong point first, or a cheaper one beside it."""
        scored = [cid for cid in self.pairs if cid != 0]
        if not scored:
            return False
        top = max(self._ratio(cid) for cid in scored)
        # Not the leader itself: the proof gives it rounds of its own.
        leader = self._best()
        again = [cid for cid in scored if cid != leader and len(self.pairs[cid]) < 2 and top > 1.0
                 and self._ratio(cid) * NEAR >= top]
        for cid in again:
            self._probe(self.configs[cid], rounds=1)
        return bool(again)

    def _best(self) -> int | None:
        """The fastest point; among those within RISE of it the cheapest
        (fewer workers, a shallower prefetch): a gain inside the noise is
        not worth more processes, and a shallower pipeline swaps faster."""
        scored = [cid for cid in self.pairs if cid != 0]
        if not scored:
            return None
        top = max(self._ratio(cid) for cid in scored)
        near = [cid for cid in scored if self._ratio(cid) * RISE >= top]

        def cost(cid: int) -> tuple[int, int, bool]:
            c = self.configs[cid]
            return int(c.get("num_workers") or 0), int(c.get("prefetch_factor") or 2), bool(c.get("pin_memory"))

        return min(near, key=cost)

    def _finish(self, best: int | None) -> None:
        confirmed = self.decision is not None and self.decision.verdict == "confirmed" and best is not None
        self.final = best if confirmed and best is not None else 0
        self.state = "done"
        self.tuned_at = self.monitor.clock()
        keep = [self.runners.get(c) for c in (self.final, self.current_id)]
        for cid, runner in list(self.runners.items()):
            if not any(runner is k for k in keep):
                runner.close()
                del self.runners[cid]

    def fail(self, exc: BaseException) -> None:
        """Back to the configuration as written; the run goes on."""
        message = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        self.failed = message
        self.feed.give_back()
        self.feed.stopping = False
        for runner in self.runners.values():
            runner.close()
        self.draining = None
        self.state = "failed"
        self.final = 0
        self.queue.clear()
        self.runners = {0: InProcess(self.torch, self.loader)}
        self.current, self.current_id, self.window = self.runners[0], 0, None
        if self.tuned_at is None:
            self.tuned_at = self.monitor.clock()
        print(f"loadlint: monitor: tuning stopped ({message}); the loader runs as written", file=sys.stderr, flush=True)

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()

    # -- the report ---------------------------------------------------------

    def _reason(self) -> str:
        if self.failed:
            return f"tuning stopped: {self.failed}"
        if self.decision is not None:
            return self.decision.reason
        if self.state == "tuning":
            return "the run ended before the tuner reached a verdict"
        return "no configuration measured faster than the one as written"

    def state_text(self) -> str:
        if self.state == "tuning":
            cid = self.current_id
            return f"tuning: trying {config_text(self.configs[cid])}" if cid else "tuning: as written"
        if self.state == "failed":
            return "tuning stopped"
        return f"tuned: {config_text(self.configs[self.final])}"

    def as_json(self) -> dict[str, Any]:
        written_rates = [w["batches_per_s"] for w in self.windows if w["config"] == 0]
        before = {"config": self.written, "batches_per_s": round(measure.median(written_rates), 3) if written_rates else None}
        leader = self.leader if self.leader is not None else self._best()
        after_id = self.final
        after_rates = [w["batches_per_s"] for w in self.windows if w["config"] == after_id]
        decision = self.decision
        if self.failed:
            verdict = "inconclusive"
        elif decision is not None:
            verdict = decision.verdict if decision.verdict != "contended" else "inconclusive"
        else:
            verdict = "refuted" if leader is not None and self.state == "done" and self._ratio(leader) <= 1.0 else "inconclusive"
        speedup = decision.speedup if decision is not None else (self._ratio(leader) if leader is not None else None)
        return {
            "loader": self.log.index,
            "before": before,
            "after": {"config": self.configs[after_id],
                      "batches_per_s": round(measure.median(after_rates), 3) if after_rates else before["batches_per_s"]},
            "speedup": round(speedup, 3) if speedup is not None and speedup == speedup else None,
            "verdict": verdict,
            "reason": self._reason(),
            "compared": self.configs[leader] if leader is not None else None,
            "interval": [round(decision.interval.low, 3), round(decision.interval.high, 3)] if decision is not None and decision.interval else None,
            "busy": self._busy(),
            "worker_cpus": self.usable,
            "tuned_at_s": self.tuned_at,
            "started_at_s": round(self.started_at, 3),
            "state": self.state,
            "points": [{"config": self.configs[cid], "ratios": [round(b / a, 3) for a, b in pairs if a > 0],
                        "ratio": round(self._ratio(cid), 3), "start_s": _round(self._start_seconds(cid))}
                       for cid, pairs in sorted(self.pairs.items())],
            "windows": self.windows,
            "failed": self.failed,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
