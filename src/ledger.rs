//! The spend ledger: one shared account of the dollars a run — or a batch of runs — has spent and has
//! promised to requests in flight, kept by the agent loop for every kind of model (HTTP providers, host
//! models, child agents, compaction summaries).
//!
//! Before each request the loop [`reserve`](Ledger::reserve)s its estimated cost (its measured input and the
//! answer it may write, at the model's price); the ledger refuses when what is spent, plus what other requests
//! in flight hold, plus this estimate would pass a cap. After the answer, the [`Hold`] is settled with the
//! request's actual cost (or dropped, which releases it: a request that failed without an answer).
//!
//! Ledgers nest: an agent's own account lies [`under`](Ledger::under) a batch's, so what the agent spends
//! counts in both and each level's cap is kept; a child agent (a `task` call) uses its parent's ledger itself.
//!
//! # Threads and cloning
//! `Send + Sync`; shared as an `Arc<Ledger>` by every agent that charges it, from any thread. A reservation
//! checks and updates every level at once (locks taken child first, then parent — never the other way), so two
//! agents racing for the last dollars of a cap cannot both get them.
//!
//! Must never: price anything itself (that is [`crate::models`]), or let an estimate that does not fit go out.

use std::sync::{Arc, Mutex, MutexGuard};

/// A shared account of spent and reserved US dollars, with an optional cap (see the module docs).
#[derive(Debug)]
pub struct Ledger {
    cap: Option<f64>,
    parent: Option<Arc<Ledger>>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    spent: f64,
    reserved: f64,
    refused: bool,
    /// The most one request settled here cost.
    largest: f64,
}

/// Dollars promised to one request in flight: [`settle`](Hold::settle) it with what the request cost; dropped
/// unsettled, it is released (nothing spent).
#[derive(Debug)]
pub struct Hold {
    ledger: Arc<Ledger>,
    usd: f64,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ledger {
    /// A ledger of its own, capped at `cap` US dollars (`None`: it only counts).
    pub fn new(cap: Option<f64>) -> Arc<Ledger> {
        Arc::new(Ledger { cap, parent: None, state: Mutex::default() })
    }

    /// An account without a cap of its own whose spending also counts in (and is capped by) `parent`.
    pub fn under(parent: Arc<Ledger>) -> Arc<Ledger> {
        Arc::new(Ledger { cap: None, parent: Some(parent), state: Mutex::default() })
    }

    /// The cap this level was made with.
    pub fn cap(&self) -> Option<f64> {
        self.cap
    }

    /// The ledger this one counts in, if any.
    pub fn parent(&self) -> Option<&Arc<Ledger>> {
        self.parent.as_ref()
    }

    /// US dollars spent through this ledger (settled requests).
    pub fn spent(&self) -> f64 {
        lock(&self.state).spent
    }

    /// US dollars held by requests in flight.
    pub fn reserved(&self) -> f64 {
        lock(&self.state).reserved
    }

    /// The most one request counted in this ledger or one above it has cost so far: a floor for the estimate
    /// of the next one, so requests in flight together (a batch's agents) are not each counted as cheaper
    /// than what the server has been charging.
    pub fn largest(&self) -> f64 {
        self.chain().iter().map(|l| lock(&l.state).largest).fold(0.0, f64::max)
    }

    /// Learn that a request elsewhere cost `usd` (another process of a distributed batch): it raises the floor
    /// of [`largest`](Ledger::largest) here as a settled request of that cost would, without counting any spend.
    pub fn note_request_cost(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            let mut s = lock(&self.state);
            s.largest = s.largest.max(usd);
        }
    }

    /// Whether a request was refused because of this level's cap: the budget it keeps is spent.
    pub fn exhausted(&self) -> bool {
        lock(&self.state).refused
    }

    /// Whether any level from this one up has a cap (`extra` counts as a cap of this level).
    pub fn capped(&self, extra: Option<f64>) -> bool {
        extra.is_some() || self.chain().iter().any(|l| l.cap.is_some())
    }

    fn chain(&self) -> Vec<&Ledger> {
        let mut levels = vec![self];
        let mut at = self;
        while let Some(p) = at.parent.as_deref() {
            levels.push(p);
            at = p;
        }
        levels
    }

    /// Count `usd` as spent at this level only (not in the ledgers above): what a loaded session had spent
    /// before this process, which an agent's own cap includes but a batch started now does not.
    pub fn record_local(&self, usd: f64) {
        lock(&self.state).spent += usd.max(0.0);
    }

    /// Whether a request estimated at `usd` would fit at every level now (`extra`: a further cap on this
    /// level, the agent's `max_cost_usd`), without reserving it: the check a loop makes before it builds the
    /// request, so a `false` ends the run and marks the level that refused as [`exhausted`](Ledger::exhausted)
    /// as [`reserve`](Ledger::reserve) does. `None` (no price known) fits only where no level has a cap.
    pub fn fits(&self, usd: Option<f64>, extra: Option<f64>) -> bool {
        let levels = self.chain();
        let mut guards: Vec<MutexGuard<'_, State>> = levels.iter().map(|l| lock(&l.state)).collect();
        check(&levels, &mut guards, usd, extra)
    }

    /// Hold `usd` (the estimate of a request about to be sent) at every level, or refuse (`None`) when it
    /// would take the spent and reserved dollars of some level past its cap (`extra`: a further cap on this
    /// level). An estimate of `None` (no price known) is refused wherever a level has a cap, and held as 0
    /// elsewhere. A refusal marks the level whose cap refused it as [`exhausted`](Ledger::exhausted).
    pub fn reserve(self: &Arc<Self>, usd: Option<f64>, extra: Option<f64>) -> Option<Hold> {
        let levels = self.chain();
        let mut guards: Vec<MutexGuard<'_, State>> = levels.iter().map(|l| lock(&l.state)).collect();
        if !check(&levels, &mut guards, usd, extra) {
            return None;
        }
        let usd = usd.unwrap_or(0.0).max(0.0);
        for s in guards.iter_mut() {
            s.reserved += usd;
        }
        drop(guards);
        Some(Hold { ledger: self.clone(), usd })
    }
}

/// Whether `usd` fits under the cap of every level (each locked, in `guards`); a level it does not fit is
/// marked refused. `extra` is a further cap on the first level.
fn check(levels: &[&Ledger], guards: &mut [MutexGuard<'_, State>], usd: Option<f64>, extra: Option<f64>) -> bool {
    let mut ok = true;
    for (i, (l, s)) in levels.iter().zip(guards.iter_mut()).enumerate() {
        let cap = if i == 0 { min_cap(l.cap, extra) } else { l.cap };
        let Some(cap) = cap else { continue };
        if !usd.is_some_and(|u| s.spent + s.reserved + u <= cap) {
            s.refused = true;
            ok = false;
        }
    }
    ok
}

fn min_cap(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Hold {
    /// What this hold promised.
    pub fn usd(&self) -> f64 {
        self.usd
    }

    /// The request was answered: its estimate is replaced by `actual` US dollars at every level.
    pub fn settle(mut self, actual: f64) {
        self.apply(actual.max(0.0));
    }

    fn apply(&mut self, actual: f64) {
        let held = std::mem::take(&mut self.usd);
        for l in self.ledger.chain() {
            let mut s = lock(&l.state);
            s.reserved = (s.reserved - held).max(0.0);
            s.spent += actual;
            s.largest = s.largest.max(actual);
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.usd > 0.0 {
            self.apply(0.0);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_would_pass_the_cap_is_refused_and_marks_the_ledger_exhausted() {
        let l = Ledger::new(Some(1.0));
        let a = l.reserve(Some(0.6), None).unwrap();
        assert!(l.reserve(Some(0.6), None).is_none(), "0.6 held + 0.6 > 1");
        assert!(l.exhausted());
        a.settle(0.3);
        assert_eq!((l.spent(), l.reserved()), (0.3, 0.0));
        assert!(l.reserve(Some(0.6), None).is_some());
    }

    #[test]
    fn an_agent_account_counts_in_its_batch_and_keeps_both_caps() {
        let batch = Ledger::new(Some(1.0));
        let a = Ledger::under(batch.clone());
        let b = Ledger::under(batch.clone());
        a.reserve(Some(0.5), None).unwrap().settle(0.5);
        assert_eq!((a.largest(), b.largest()), (0.5, 0.5), "what one agent paid is known to the others");
        let spent = batch.spent();
        a.note_request_cost(0.75);
        a.note_request_cost(f64::NAN);
        assert_eq!((a.largest(), batch.spent()), (0.75, spent), "a noted cost is a floor for estimates, not spend");
        assert!(b.reserve(Some(0.6), None).is_none(), "the batch's cap");
        assert!(batch.exhausted() && !b.exhausted());
        assert!(b.reserve(Some(0.2), Some(0.1)).is_none(), "the agent's own cap");
        let held = b.reserve(Some(0.4), None).unwrap();
        assert!((batch.reserved() - 0.4).abs() < 1e-12);
        drop(held);
        assert_eq!((batch.spent(), batch.reserved(), b.spent()), (0.5, 0.0, 0.0));
    }

    #[test]
    fn an_unpriced_request_is_refused_only_under_a_cap() {
        assert!(Ledger::new(None).reserve(None, None).is_some());
        assert!(Ledger::new(None).reserve(None, Some(5.0)).is_none());
        assert!(Ledger::under(Ledger::new(Some(5.0))).reserve(None, None).is_none());
        assert!(!Ledger::new(Some(5.0)).fits(None, None));
    }

    #[test]
    fn spend_recorded_locally_is_not_counted_above() {
        let batch = Ledger::new(Some(1.0));
        let a = Ledger::under(batch.clone());
        a.record_local(2.0);
        assert_eq!((a.spent(), batch.spent()), (2.0, 0.0));
        assert!(a.reserve(Some(0.1), Some(2.05)).is_none());
        assert!(a.reserve(Some(0.1), None).is_some());
    }

    #[test]
    fn concurrent_reservations_never_pass_the_cap() {
        let l = Ledger::new(Some(1.0));
        let held: Vec<Option<Hold>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..16).map(|_| s.spawn(|| l.reserve(Some(0.1), None))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let n = held.iter().filter(|h| h.is_some()).count();
        assert!((9..=10).contains(&n), "{n}");
        assert!(l.reserved() <= 1.0 + 1e-9);
    }
}
