//! The agent's side of compaction: how big the next request is, when to compact, and appending the
//! record ([`crate::compaction`] holds the rules of what stays).

use super::*;

/// How the next request's size is estimated: the bytes-per-token ratio and the last reported usage (read
/// and updated together).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sizing {
    pub(super) estimator: crate::compaction::Estimator,
    pub(super) baseline: Option<Baseline>,
}

/// What the API reported for the last request: its prompt tokens plus the answer's tokens, and how many
/// entries the store held once that answer was in. The next request's size is this plus what was added
/// since, so the estimate stays anchored to the API's own count (and costs no serialization per turn).
#[derive(Clone, Copy, Debug)]
pub(super) struct Baseline {
    pub(super) tokens: u64,
    pub(super) upto: usize,
}

/// The tokens of a request as the API reports them (uncached, cache writes and cache reads).
pub(super) fn prompt_tokens(u: &Usage) -> u64 {
    u.input_tokens + u.cache_creation_input_tokens.unwrap_or(0) + u.cache_read_input_tokens.unwrap_or(0)
}

impl Agent {
    /// A model turn's request, compacted before it when it would pass the threshold (see
    /// [`Agent::after_overflow`] for the compaction after it). `None`: the summary left too little under the
    /// spend cap for the request, which is then not sent.
    pub(super) fn turn_request(
        &self,
        wrap_up: (bool, bool),
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<(Request, Option<u64>)>> {
        use crate::compaction::Reason;
        let mut request = self.wrapped_request(wrap_up);
        let (tokens, mut measured) = self.estimate_request(&request);
        if self.over_threshold(tokens) {
            let mut spent = (&mut run.usage, &mut run.cost_usd);
            if self.compact_inner(Reason::Threshold, None, false, cancel, &mut spent, on_event)?.is_some() {
                request = self.wrapped_request(wrap_up);
                measured = Some(self.sizes.request_bytes(&request));
                // The summary was spent too: the turn's request must still fit under the cap.
                if !self.request_affordable(&request) {
                    return Ok(None);
                }
            }
        }
        Ok(Some((request, measured)))
    }

    /// A model turn failed with `e`: when it is an answer that the prompt is too long, compact and give the
    /// turn's request to send again (at most twice, the second time keeping only the last turn; `overflows`
    /// counts them); else `e`. `None`: the summary left too little under the spend cap for the request.
    pub(super) fn after_overflow(
        &self,
        e: Error,
        overflows: &mut u32,
        wrap_up: (bool, bool),
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<(Request, Option<u64>)>> {
        use crate::compaction::Reason;
        if *overflows >= 2 || !self.config().compaction || !crate::compaction::is_overflow(&e) {
            return Err(e);
        }
        *overflows += 1;
        let mut spent = (&mut run.usage, &mut run.cost_usd);
        if self.compact_inner(Reason::Overflow, None, *overflows > 1, cancel, &mut spent, on_event)?.is_none() {
            return Err(e);
        }
        let request = self.wrapped_request(wrap_up);
        let measured = Some(self.sizes.request_bytes(&request));
        // A request sent again is a request: after the summary's cost it must fit under the cap.
        if !self.request_affordable(&request) {
            return Ok(None);
        }
        Ok(Some((request, measured)))
    }

    /// The next request, as the wrap-up asks for it (see [`crate::progress::wrap_up`]).
    pub(super) fn wrapped_request(&self, (wrap_up, without_tools): (bool, bool)) -> Request {
        let mut r = self.request();
        crate::progress::wrap_up(&mut r, wrap_up, without_tools);
        r
    }

    /// The context window used for compaction: the configured one, else the model table's.
    pub fn context_window(&self) -> Option<u64> {
        let c = lock(&self.config);
        c.context_window.or_else(|| crate::models::context_window(&c.model))
    }

    /// Tokens the next request would carry, estimated from its size and the ratio of the last real usage
    /// (no request is made). `input`: user input to count as if it were added.
    pub fn estimate_tokens(&self, input: Option<Vec<ContentBlock>>) -> u64 {
        let extra = input.as_ref().map(crate::compaction::json_bytes).unwrap_or(0);
        let est = lock(&self.sizing).estimator;
        match self.baseline_estimate() {
            Some(t) => t + est.tokens(extra),
            None => est.tokens(self.sizes.request_bytes(&self.request_with(input))),
        }
    }

    /// The next request's tokens from the last reported usage plus what was added since (`None` without a
    /// usable baseline: before the first answer, after a compaction or a reset).
    pub(super) fn baseline_estimate(&self) -> Option<u64> {
        let sizing = *lock(&self.sizing);
        let b = sizing.baseline?;
        let added = self.conversation.content_bytes_from(b.upto)?;
        Some(b.tokens + sizing.estimator.tokens(added))
    }

    /// The next request's estimated tokens, and its size in bytes when it had to be measured (then the answer's
    /// usage calibrates the estimator).
    pub(super) fn estimate_request(&self, request: &Request) -> (u64, Option<u64>) {
        match self.baseline_estimate() {
            Some(t) => (t, None),
            None => {
                let bytes = self.sizes.request_bytes(request);
                (lock(&self.sizing).estimator.tokens(bytes), Some(bytes))
            }
        }
    }

    /// Anchor the estimate to the newest answered turn in the store that no compaction came after (what
    /// a loaded session holds).
    pub(super) fn rebase(&self) {
        let entries = self.conversation.snapshot();
        let mut found = None;
        for (i, e) in entries.iter().enumerate().rev() {
            if crate::compaction::Compaction::of(e).is_some() {
                break;
            }
            if e.role == EntryRole::Assistant && e.status == EntryStatus::Complete {
                found = e.usage.as_ref().map(|u| (i, prompt_tokens(u) + u.output_tokens)).filter(|(_, t)| *t > 0);
                break;
            }
        }
        lock(&self.sizing).baseline = found.map(|(i, tokens)| Baseline { tokens, upto: i + 1 });
    }

    /// Tokens the next request would carry: from the API's token-counting endpoint where the provider offers
    /// one (Anthropic), else [`Agent::estimate_tokens`]. `input`: user input to count as if it were added.
    pub fn count_tokens(&self, input: Option<Vec<ContentBlock>>) -> Result<u64> {
        let request = self.request_with(input.clone());
        match self.provider().count_tokens(&request, &CancelToken::new())? {
            Some(n) => Ok(n),
            None => Ok(self.estimate_tokens(input)),
        }
    }

    pub(super) fn request_with(&self, input: Option<Vec<ContentBlock>>) -> Request {
        let mut request = self.request();
        if let Some(blocks) = input {
            let mut entries = self.conversation.snapshot();
            entries.push(Entry::new(EntryRole::User, blocks));
            request.messages = self.view_of(&entries).into();
            let provider = self.provider();
            if lock(&self.config).cache && provider.supports_cache() {
                crate::cache::add_breakpoints(&mut request);
            }
            let model = request.model.clone();
            crate::carry::fit_request(&mut request, crate::carry::Target { provider: provider.name(), model: &model });
        }
        request
    }

    /// Whether a request of `tokens` passes the compaction threshold: `compact_threshold` of the window, or
    /// less when the answer's `max_tokens` would not fit beside it.
    pub(super) fn over_threshold(&self, tokens: u64) -> bool {
        let (on, threshold, max_tokens) = {
            let c = lock(&self.config);
            (c.compaction, c.compact_threshold, c.max_tokens)
        };
        let Some(window) = self.context_window().filter(|_| on) else { return false };
        let mut limit = threshold * window as f64;
        if u64::from(max_tokens) * 2 < window {
            limit = limit.min((window - u64::from(max_tokens)) as f64);
        }
        tokens as f64 > limit
    }

    /// Compact the conversation now (see [`crate::compaction`]): summarize the older turns with the model
    /// (`instructions` say what the summary should keep), keeping the first user message and the newest
    /// turns; when the summary request fails, drop the older turns instead. The history keeps everything;
    /// the record is an entry (and a session line). Returns it, or `None` when there was nothing to compact.
    pub fn compact(
        &self,
        instructions: Option<&str>,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<crate::compaction::Compaction>> {
        let _busy = self.begin(CancelToken::new())?;
        let cancel = self.token();
        let mut usage = Usage::default();
        let mut cost = None;
        let mut spent = (&mut usage, &mut cost);
        self.compact_inner(crate::compaction::Reason::Manual, instructions, false, &cancel, &mut spent, on_event)
    }

    /// [`Agent::compact_untraced`] inside a `compaction` span (see [`crate::trace`]).
    pub(super) fn compact_inner(
        &self,
        reason: crate::compaction::Reason,
        instructions: Option<&str>,
        aggressive: bool,
        cancel: &CancelToken,
        spent: &mut (&mut Usage, &mut Option<f64>),
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<crate::compaction::Compaction>> {
        let span = if crate::trace::enabled() {
            let name = serde_json::to_value(reason).ok();
            crate::trace::compaction_span(name.as_ref().and_then(Value::as_str).unwrap_or("manual"))
        } else {
            tracing::Span::none()
        };
        let _in = span.enter();
        let done = self.compact_untraced(reason, instructions, aggressive, cancel, spent, on_event);
        super::spans::end_compaction(&span, &done);
        done
    }

    fn compact_untraced(
        &self,
        reason: crate::compaction::Reason,
        instructions: Option<&str>,
        aggressive: bool,
        cancel: &CancelToken,
        spent: &mut (&mut Usage, &mut Option<f64>),
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<crate::compaction::Compaction>> {
        use crate::compaction::{Compaction, Method, Plan, entry_bytes, json_bytes, request_bytes};
        let config = self.config();
        let window = self.context_window();
        let request = self.request();
        let est = lock(&self.sizing).estimator;
        let total = request_bytes(&request);
        let before = est.tokens(total);
        // Budgets in bytes: the window's, or (unknown window) the request's own size.
        let window_bytes = window.map(|w| w as f64 * est.bytes_per_token).unwrap_or(total as f64 * 1.25);
        let fits = |bytes: u64| (bytes as f64) <= config.compact_threshold * window_bytes;
        let target = (0.5 * window_bytes) as u64;
        let manual = reason == crate::compaction::Reason::Manual;
        // Keep about 30% of the window verbatim; asked by hand, at most a quarter of what there is (so a
        // conversation far from the limit still gets compacted).
        let tail_budget = match (aggressive, manual) {
            (true, _) => 0,
            (false, true) => ((0.3 * window_bytes) as u64).min(total / 4),
            (false, false) => (0.3 * window_bytes) as u64,
        };
        let head_budget = (0.1 * window_bytes) as u64;
        let entries = self.conversation.snapshot();
        let eff = crate::compaction::effective(&entries).into_owned();
        let plan = Plan::new(&eff, tail_budget, head_budget);
        let size_of =
            |ids: &[String]| -> u64 { eff.iter().filter(|e| ids.contains(&e.id)).map(entry_bytes).sum::<u64>() };
        const NOTE_BYTES: u64 = 160;
        let clear_saves = size_of(&plan.clearable).saturating_sub(NOTE_BYTES * plan.clearable.len() as u64);
        let mut record = Compaction {
            reason,
            method: Method::ClearToolResults,
            tokens_before: before,
            tokens_after: before,
            removed: Vec::new(),
            cleared: Vec::new(),
            summary: None,
            fallback_reason: None,
            instructions: instructions.map(str::to_string),
            todos: None,
        };
        // 1. The cheapest win: clear old, large tool results, when that is enough.
        let clearing_is_enough = !manual && !aggressive && total.saturating_sub(clear_saves) <= target;
        if !plan.clearable.is_empty() && (clearing_is_enough || !plan.has_middle()) {
            record.cleared = plan.clearable.clone();
            record.tokens_after = est.tokens(total.saturating_sub(clear_saves));
            return self.record_compaction(record, None, spent, on_event).map(Some);
        }
        if !plan.has_middle() {
            return Ok(None);
        }
        // 2. Summarize the middle; 3. or drop it.
        let middle = &eff[plan.middle_start..plan.tail_start];
        let middle_bytes: u64 = middle.iter().map(entry_bytes).sum();
        let removed: Vec<String> = middle.iter().map(|e| e.id.clone()).collect();
        let todos = {
            let list = self.todos();
            (!list.is_empty()).then(|| crate::todo::render(&list))
        };
        let model = config.compaction_model.clone().unwrap_or(config.model.clone());
        let max_summary = window.map(|w| (w / 20).clamp(1024, 8192)).unwrap_or(4096) as u32;
        let transcript_budget = ((0.5 * window_bytes) as usize).clamp(8_000, 600_000);
        let text = crate::compaction::transcript(middle, transcript_budget);
        let summary_req =
            crate::compaction::summary_request(&model, &text, todos.as_deref(), instructions, max_summary);
        let mut summary_turn = None;
        let summary_tokens = est.tokens(request_bytes(&summary_req));
        // The summary request is held in the ledger like any request: its input and the whole summary.
        let hold = self.reserve(&model, summary_tokens, Some(u64::from(max_summary)));
        let answer = if let Some(hold) = hold {
            // The summary request is a request too: the host's before_request hook sees it.
            let before_request = lock(&self.control).hooks.before_request.clone();
            if let Some(hook) = before_request {
                hook(&summary_req).map_err(|message| Error::Hook { hook: "before_request".into(), message })?;
            }
            // The summary request's own `chat` span, inside the compaction's.
            let chat = crate::trace::chat_span(&tracing::Span::current(), self.provider().name(), &model);
            let sent = chat.in_scope(|| self.provider().send(&summary_req, cancel, &mut |_| {}));
            match &sent {
                Ok(resp) => crate::trace::end_chat(&chat, &resp.message),
                Err(e) if !chat.is_disabled() => crate::trace::record_error(&chat, &e.error_type()),
                Err(_) => {}
            }
            sent.map(|resp| {
                let (m, u) = (&resp.message.model, &resp.message.usage);
                let cost = Agent::request_cost(&model, m, u, summary_tokens, u64::from(max_summary));
                hold.settle(cost.unwrap_or(0.0));
                (resp, cost)
            })
        } else {
            Err(Error::Config("it would take the spend past max_cost_usd".into()))
        };
        let fallback = match answer {
            Err(Error::Cancelled { .. }) => return Err(Error::Cancelled { partial: None }),
            Err(e) => Some(format!("the summary request failed: {e}")),
            Ok((resp, cost)) => {
                let summary = resp.message.text();
                let after = total.saturating_sub(middle_bytes) + json_bytes(&summary) + NOTE_BYTES * 2;
                let used = (resp.message.model.clone(), resp.message.usage.clone(), cost);
                summary_turn = Some(used);
                if summary.trim().is_empty() {
                    Some("the summary came back empty".to_string())
                } else if !fits(after) && window.is_some() {
                    Some(format!("the summary left the request at ~{} tokens, still too large", est.tokens(after)))
                } else {
                    record.method = Method::Summary;
                    record.summary = Some(summary);
                    record.tokens_after = est.tokens(after);
                    None
                }
            }
        };
        record.removed = removed;
        record.todos = todos;
        if let Some(why) = fallback {
            record.method = Method::Drop;
            record.fallback_reason = Some(why);
            let mut after = total.saturating_sub(middle_bytes) + NOTE_BYTES * 2;
            if window.is_some() && !fits(after) && !aggressive {
                // Keep only the last turn.
                let tight = Plan::new(&eff, 0, head_budget);
                let middle = &eff[tight.middle_start..tight.tail_start];
                record.removed = middle.iter().map(|e| e.id.clone()).collect();
                after = total.saturating_sub(middle.iter().map(entry_bytes).sum::<u64>()) + NOTE_BYTES * 2;
            }
            record.tokens_after = est.tokens(after);
        }
        let model_for = summary_turn.map(|(m, u, c)| (if m.is_empty() { model.clone() } else { m }, u, c));
        self.record_compaction(record, model_for, spent, on_event).map(Some)
    }

    /// Store the compaction (and its summary request's usage), tell the host.
    pub(super) fn record_compaction(
        &self,
        record: crate::compaction::Compaction,
        summary_turn: Option<(String, Usage, Option<f64>)>,
        spent: &mut (&mut Usage, &mut Option<f64>),
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<crate::compaction::Compaction> {
        lock(&self.sizing).baseline = None;
        let mut entry = record.clone().into_entry();
        if let Some((model, usage, cost)) = summary_turn {
            self.charge(cost, &usage, spent.0, spent.1);
            if let Some(c) = cost {
                entry.meta.insert(crate::conversation::COST_KEY.into(), serde_json::json!(c));
            }
            entry.usage = Some(usage);
            entry.model = Some(model);
        }
        self.record(entry)?;
        on_event(&Event::Compaction {
            reason: record.reason,
            method: record.method,
            tokens_before: record.tokens_before,
            tokens_after: record.tokens_after,
            removed: record.removed.len(),
            cleared: record.cleared.len(),
            summary: record.summary.clone(),
            fallback_reason: record.fallback_reason.clone(),
        });
        Ok(record)
    }
}
