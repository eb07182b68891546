//! Structured output (`output_schema`, see [`crate::output`]): an answer is validated against the schema,
//! the model is told what was wrong and asked again (up to `retries` times), and a run whose last answer is
//! still invalid ends with [`Error::OutputValidation`]. With the final-answer tool, its call is the answer; a
//! turn cut off or refused is validated as it is, without a correction (asking again would hit the same wall).
//!
//! Must never: run the other calls of a turn that called the final-answer tool (each gets its one result).

use super::*;

/// What checking a structured answer decided.
enum Verdict {
    /// Valid: the run ends with it.
    Done,
    /// Invalid, the model was told why: another turn.
    Retry,
}

#[derive(Default)]
pub(super) struct Output {
    /// Structured answers the model gave in this run (the first one and its corrections).
    attempts: u32,
}

impl Policy for Output {
    fn name(&self) -> &'static str {
        "output"
    }

    fn after_response(&mut self, cx: &mut Cx<'_>, a: &Answer<'_>) -> Result<Flow> {
        let Some(spec) = lock(&cx.agent.config).output.clone() else { return Ok(Flow::Go) };
        if a.cut_off {
            // No correction: asking again would hit the same wall.
            let answer = crate::output::answer_of(a.message, &spec.schema);
            self.attempts += 1;
            return match crate::output::check(&answer, &spec.schema) {
                Ok(v) => {
                    cx.run.output = Some(v);
                    Ok(Flow::Go)
                }
                Err((errors, value)) => Err(self.failure(errors, value, &answer)),
            };
        }
        if !a.final_answer {
            return Ok(Flow::Go);
        }
        match self.final_answer(cx, a, (spec.schema.clone(), spec.retries))? {
            Verdict::Done => Ok(Flow::Stop),
            Verdict::Retry => Ok(Flow::Again),
        }
    }

    fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        let Some(spec) = lock(&cx.agent.config).output.clone() else { return Ok(Flow::Go) };
        match self.text_answer(cx, &spec)? {
            Verdict::Done => Ok(Flow::Go),
            Verdict::Retry => Ok(Flow::Again),
        }
    }
}

impl Output {
    /// The error that ends a run whose last structured answer was invalid.
    fn failure(&self, errors: Vec<String>, output: Option<Value>, answer: &crate::output::Answer) -> Error {
        let text = match answer {
            crate::output::Answer::Text(t) => t.clone(),
            crate::output::Answer::Tool { value, .. } => value.to_string(),
        };
        Error::OutputValidation(Box::new(crate::output::OutputFailure {
            errors,
            output,
            text,
            attempts: self.attempts,
        }))
    }

    /// A turn that ended without tool calls, under `output_schema`: its text is the answer.
    fn text_answer(&mut self, cx: &mut Cx<'_>, spec: &crate::output::OutputSpec) -> Result<Verdict> {
        let answer = crate::output::Answer::Text(cx.run.text.clone());
        self.attempts += 1;
        match crate::output::check(&answer, &spec.schema) {
            Ok(v) => {
                cx.run.output = Some(v);
                Ok(Verdict::Done)
            }
            Err((errors, value)) => {
                if self.attempts > spec.retries {
                    return Err(self.failure(errors, value, &answer));
                }
                let text = crate::output::correction(&errors, cx.agent.output_tool(spec));
                cx.agent.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
                Ok(Verdict::Retry)
            }
        }
    }

    /// A turn that called `final_answer`: its input is the answer. The turn's other calls are not run (the
    /// model is told to make them before answering); every call gets its one result.
    fn final_answer(&mut self, cx: &mut Cx<'_>, a: &Answer<'_>, (schema, retries): (Value, u32)) -> Result<Verdict> {
        let answer = crate::output::answer_of(a.message, &schema);
        self.attempts += 1;
        let verdict = match &answer {
            crate::output::Answer::Tool { id, .. } if a.bad_inputs.contains_key(id) => {
                let raw = a.bad_inputs.get(id).cloned();
                Err((vec![bad_input_message(raw.as_ref().unwrap_or(&Value::Null))], raw))
            }
            other => crate::output::check(other, &schema),
        };
        let failed = verdict.as_ref().err().map(|(errors, _)| crate::output::correction(errors, true));
        for call in a.calls {
            (cx.on_event)(&Event::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
            let (content, is_error) = if call.name != crate::output::TOOL_NAME {
                let why = "not run: final_answer was called in the same turn; make the calls you need first,                            then call final_answer alone";
                (why.to_string(), true)
            } else {
                match &failed {
                    Some(text) => (text.clone(), true),
                    None => ("accepted".to_string(), false),
                }
            };
            cx.agent.record(Entry::tool_result(&call.id, &call.name, Value::String(content.clone()), is_error))?;
            (cx.on_event)(&Event::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: Value::String(content),
                is_error,
                denied: false,
                duration_ms: 0,
            });
        }
        let run = &mut *cx.run;
        match verdict {
            Ok(v) => {
                // The caller sees what a native answer gives: the JSON as the text, a turn that ended.
                if run.text.trim().is_empty() {
                    run.text = v.to_string();
                }
                run.stop_reason = Some(StopReason::EndTurn);
                run.output = Some(v);
                Ok(Verdict::Done)
            }
            Err((errors, value)) if self.attempts > retries => Err(self.failure(errors, value, &answer)),
            Err(_) => Ok(Verdict::Retry),
        }
    }
}

impl Agent {
    /// Whether this agent's requests carry the final-answer tool (else the native field).
    pub(in crate::agent) fn output_tool(&self, spec: &crate::output::OutputSpec) -> bool {
        spec.uses_tool(self.provider().native_output())
    }
}
