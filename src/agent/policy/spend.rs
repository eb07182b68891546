//! The spend cap: `max_cost_usd`, and a batch's `budget_usd` through the ledger this agent counts in (see
//! [`crate::ledger`]). Before each request: the next one must fit under every cap, else the run ends with
//! stop_reason `budget` (not an error). The hold of each request as it is sent, and its charge when its
//! answer is priced, are the loop's (`run_loop.rs`); the accounts they use are here.
//!
//! Must never: let a request go that would pass a cap, or stop a run that has no cap.

use super::*;

pub(super) struct SpendCap;

impl Policy for SpendCap {
    fn name(&self) -> &'static str {
        "spend cap"
    }

    fn before_request(&mut self, cx: &mut Cx<'_>, _plan: &mut TurnPlan) -> Result<Flow> {
        if cx.agent.next_request_affordable() {
            return Ok(Flow::Go);
        }
        cx.agent.budget_stop(cx.run)?;
        Ok(Flow::Stop)
    }
}

impl Agent {
    /// What this agent has spent so far in USD by the price table (every request, its children's and
    /// compaction summaries included; a loaded session's turns too): what its ledger holds as spent, and what
    /// `max_cost_usd` is checked against. Each request is priced at the higher of the requested and the
    /// answering model's price; one whose usage was not reported, at its estimate (see [`crate::ledger`]).
    pub fn spent_usd(&self) -> f64 {
        lock(&self.spend).ledger.spent()
    }

    /// The ledger this agent's requests are held against and charged to (see [`crate::ledger`]).
    pub fn ledger(&self) -> Arc<crate::ledger::Ledger> {
        lock(&self.spend).ledger.clone()
    }

    /// Count this agent's spending from now on in `parent` as well (a batch's ledger, whose cap then holds
    /// for it beside `max_cost_usd`); `None`: in its own account only again. What it spent before stays
    /// counted against its own cap, not against `parent`'s.
    pub fn join_ledger(&self, parent: Option<Arc<crate::ledger::Ledger>>) {
        let mut spend = lock(&self.spend);
        let before = spend.ledger.spent();
        let ledger = match parent {
            Some(p) => crate::ledger::Ledger::under(p),
            None => crate::ledger::Ledger::new(None),
        };
        ledger.record_local(before);
        spend.ledger = ledger;
    }

    /// Count what a request cost (see [`Agent::request_cost`]) in the run's usage and cost and in this
    /// agent's own total; the ledger is charged by the request's [`Hold`](crate::ledger::Hold).
    pub(in crate::agent) fn charge(
        &self,
        cost: Option<f64>,
        usage: &Usage,
        run_usage: &mut Usage,
        run_cost: &mut Option<f64>,
    ) {
        run_usage.add(usage);
        if let Some(c) = cost {
            *run_cost.get_or_insert(0.0) += c;
            *lock(&self.spend).usd.get_or_insert(0.0) += c;
        }
    }

    /// What a request asked of `requested` and answered as `answered` cost: its [charged
    /// usage](Agent::charged_usage) at the higher of the two models' prices.
    pub(in crate::agent) fn request_cost(
        requested: &str,
        answered: &str,
        usage: &Usage,
        input_tokens: u64,
        max_tokens: u64,
    ) -> Option<f64> {
        let charged = Agent::charged_usage(usage, input_tokens, max_tokens);
        crate::models::charged_cost_usd(requested, answered, &charged)
    }

    /// The usage a request is charged for: what the answer reported; when it reported none — no input tokens
    /// (every request has some) and no output beyond the one token a stream's `message_start` claims before
    /// any usage is known — the request's estimate instead: `input_tokens` measured before it was sent and an
    /// answer of `max_tokens`. Never nothing.
    pub(in crate::agent) fn charged_usage(usage: &Usage, input_tokens: u64, max_tokens: u64) -> Usage {
        let input = usage.input_tokens
            + usage.cache_creation_input_tokens.unwrap_or(0)
            + usage.cache_read_input_tokens.unwrap_or(0);
        if input > 0 || usage.output_tokens > 1 {
            return usage.clone();
        }
        Usage { input_tokens, output_tokens: max_tokens, ..Usage::default() }
    }

    /// A request of about `input_tokens` on `model`, in USD, before it is sent: its input, and an answer as
    /// large as the largest seen so far (`max_tokens` before the first; `output_tokens` when given) — and
    /// never less than the most a request of its ledger has cost so far (see [`crate::ledger::Ledger::largest`]).
    fn estimate_usd(&self, model: &str, input_tokens: u64, output_tokens: Option<u64>) -> Option<f64> {
        let out =
            output_tokens.or(lock(&self.spend).out_tokens).unwrap_or_else(|| u64::from(lock(&self.config).max_tokens));
        let floor = self.ledger().largest();
        crate::models::request_cost_usd(model, input_tokens, out).map(|e| e.max(floor))
    }

    /// Whether a request of about `input_tokens` on `model` fits under every cap that holds for this agent
    /// (its `max_cost_usd`, a batch's budget); nothing is held.
    pub(in crate::agent) fn affordable(&self, model: &str, input_tokens: u64) -> bool {
        let cap = lock(&self.config).max_cost_usd;
        let ledger = self.ledger();
        if cap.is_none() && !ledger.capped(None) {
            return true;
        }
        // A model without a price under a cap: refused rather than spent unbounded (`max_cost_usd` refuses
        // such a model when the agent is built; a batch's budget refuses its requests).
        ledger.fits(self.estimate_usd(model, input_tokens, None), cap)
    }

    /// Hold the estimate of a request about to be sent (see [`Agent::affordable`]); `None`: it would pass a
    /// cap and must not be sent.
    pub(in crate::agent) fn reserve(
        &self,
        model: &str,
        input_tokens: u64,
        output_tokens: Option<u64>,
    ) -> Option<crate::ledger::Hold> {
        let cap = lock(&self.config).max_cost_usd;
        let ledger = self.ledger();
        let estimate = if cap.is_none() && !ledger.capped(None) {
            Some(0.0)
        } else {
            self.estimate_usd(model, input_tokens, output_tokens)
        };
        ledger.reserve(estimate, cap)
    }

    /// With a spend cap: whether the next request fits under it. `false` ends the run with `budget`.
    pub(in crate::agent) fn next_request_affordable(&self) -> bool {
        if !self.under_cap() {
            return true;
        }
        self.request_affordable(&self.request())
    }

    /// Whether some cap holds for this agent's requests: its `max_cost_usd`, or a ledger's it counts in.
    pub(in crate::agent) fn under_cap(&self) -> bool {
        lock(&self.config).max_cost_usd.is_some() || self.ledger().capped(None)
    }

    /// With a spend cap: whether `request` fits under it (always, without one).
    pub(in crate::agent) fn request_affordable(&self, request: &Request) -> bool {
        if !self.under_cap() {
            return true;
        }
        let (tokens, _) = self.estimate_request(request);
        self.affordable(&request.model, tokens)
    }

    /// End the run because the next request would pass `max_cost_usd`: not an error, stop_reason `budget`.
    pub(in crate::agent) fn budget_stop(&self, run: &mut RunResult) -> Result<()> {
        let batch = self.ledger().parent().filter(|p| p.exhausted()).and_then(|p| p.cap());
        let note = match (batch, lock(&self.config).max_cost_usd) {
            (Some(b), _) => format!("stopped: the next request would take the spend past the batch's budget_usd={b}"),
            (None, Some(cap)) => format!("stopped: the next request would take the spend past max_cost_usd={cap}"),
            (None, None) => "stopped: the next request would take the spend past its budget".to_string(),
        };
        self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
        run.stop_reason = Some(StopReason::Budget);
        // Every model under a cap has a price: what this run spent is known, nothing included.
        run.cost_usd = Some(run.cost_usd.unwrap_or(0.0));
        Ok(())
    }
}
