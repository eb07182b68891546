//! Helpers shared by the agent-core integration tests (tests/agent_loop.rs, tests/agent_session.rs): the
//! API-view invariant, and a `Rig` that runs one scenario through the scripted provider or the real
//! AnthropicProvider against the mock server (SSE or JSON). Included with `#[path]`; each test file uses
//! a subset, hence the dead_code allowance.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::mock::MockServer;
use serde_json::{Value, json};
use tooloop::provider::host::ScriptStep;
use tooloop::provider::{ScriptedProvider, Secret};
use tooloop::types::ToolUseBlock;
use tooloop::{
    Agent, AgentConfig, ApiError, ApiErrorKind, ContentBlock, Error, Message, MessageResponse, Protocol, Provider,
    ProviderConfig, Role, Tool, ToolContext, ToolOutput,
};

pub const KEY: &str = "sk-ant-mock-agent-SECRET-5f3c9e71";

/// The API view invariant: starts with a user turn, roles alternate, every tool_use is answered exactly once
/// by a tool_result at the front of the very next user message, in call order, and no tool_result appears
/// anywhere else.
pub fn assert_valid_view(view: &[Message]) {
    assert!(!view.is_empty(), "the view is empty");
    assert_eq!(view[0].role, Role::User, "the view must start with a user turn: {view:#?}");
    for (i, pair) in view.windows(2).enumerate() {
        assert_ne!(pair[0].role, pair[1].role, "roles must alternate (messages {i} and {}): {view:#?}", i + 1);
    }
    for (i, m) in view.iter().enumerate() {
        assert!(!m.content.is_empty(), "message {i} is empty: {view:#?}");
        let calls: Vec<&str> = m
            .content
            .iter()
            .filter_map(|b| if let ContentBlock::ToolUse(t) = b { Some(t.id.as_str()) } else { None })
            .collect();
        if m.role == Role::Assistant {
            if calls.is_empty() {
                continue;
            }
            let next =
                view.get(i + 1).unwrap_or_else(|| panic!("tool_use in the last message {i} is unanswered: {view:#?}"));
            let leading: Vec<&str> = next
                .content
                .iter()
                .map_while(|b| if let ContentBlock::ToolResult(r) = b { Some(r.tool_use_id.as_str()) } else { None })
                .collect();
            assert_eq!(
                leading,
                calls,
                "message {} must open with one result per call of message {i}, in call order",
                i + 1
            );
            let all_results = next.content.iter().filter(|b| matches!(b, ContentBlock::ToolResult(_))).count();
            assert_eq!(all_results, calls.len(), "message {} holds tool_results after its text", i + 1);
        } else {
            let after_calls = i > 0 && view[i - 1].content.iter().any(|b| matches!(b, ContentBlock::ToolUse(_)));
            if !after_calls {
                assert!(
                    !m.content.iter().any(|b| matches!(b, ContentBlock::ToolResult(_))),
                    "user message {i} holds a tool_result but does not follow a tool_use turn: {view:#?}"
                );
            }
        }
    }
}

/// The `messages` of a recorded request body, parsed and checked.
pub fn checked_messages(body: &Value) -> Vec<Message> {
    let view: Vec<Message> = serde_json::from_value(body["messages"].clone()).expect("request messages parse");
    assert_valid_view(&view);
    view
}

/// `(tool_use_id, text, is_error)` of every tool_result block of a message (JSON).
pub fn results_of(message: &Value) -> Vec<(String, String, bool)> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(items) => items.iter().filter_map(|x| x["text"].as_str()).collect::<Vec<_>>().join("\n"),
                other => other.to_string(),
            };
            (b["tool_use_id"].as_str().unwrap_or("").to_string(), text, b["is_error"] == true)
        })
        .collect()
}

/// The agent config of these tests. Prompt caching is off: they compare request bytes with the stored view
/// and with earlier requests; the caching markers and their byte-stable prefix are tested on their own
/// (tests/agent_guards.rs).
pub fn config() -> AgentConfig {
    AgentConfig { model: "claude-sonnet-4-6".into(), max_tokens: 1024, cache: false, ..Default::default() }
}

/// [`config`] with the runaway guard and progress detection on: what `progress_guard: true` gives (the
/// library's default is off; the `tooloop` command turns them on).
pub fn guarded() -> AgentConfig {
    AgentConfig {
        repeat_guard: Some(tooloop::RepeatGuard::default()),
        progress_guard: Some(tooloop::progress::ProgressGuard::default()),
        ..config()
    }
}

pub fn anthropic(mock: &MockServer) -> Arc<dyn Provider> {
    let mut c = ProviderConfig::new(Protocol::Anthropic);
    c.api_key = Some(Secret::new(KEY));
    c.base_url = Some(mock.base_url());
    c.http.initial_backoff = Duration::from_millis(10);
    c.http.max_backoff = Duration::from_millis(50);
    c.build().expect("provider builds")
}

/// The scenario's responses as scripted steps: `anthropic` messages become replies, error statuses become
/// one `Fail` each (the scripted provider has no HTTP retries).
pub fn scripted_steps(scenario: &Value) -> Vec<ScriptStep> {
    scenario["responses"]
        .as_array()
        .expect("scenario responses")
        .iter()
        .map(|r| {
            if let Some(m) = r.get("anthropic") {
                ScriptStep::Reply(
                    serde_json::from_value::<MessageResponse>(m.clone()).expect("anthropic message parses"),
                )
            } else {
                let status = r["status"].as_u64().unwrap_or(500) as u16;
                let error_type = r["json"]["error"]["type"].as_str().unwrap_or("").to_string();
                ScriptStep::Fail(Error::Api(Box::new(ApiError {
                    kind: ApiErrorKind::classify(status, &error_type),
                    status,
                    error_type,
                    message: r["json"]["error"]["message"].as_str().unwrap_or("").to_string(),
                    request_id: None,
                    retry_after: None,
                    hint: None,
                })))
            }
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// ScriptedProvider replaying the scenario's messages.
    Scripted,
    /// AnthropicProvider against the mock server, `stream: true` (SSE).
    MockSse,
    /// AnthropicProvider against the mock server, `stream: false` (JSON).
    MockJson,
}

/// An agent wired to one backend, with access to what the backend received.
pub struct Rig {
    pub kind: Kind,
    pub agent: Arc<Agent>,
    pub mock: Option<MockServer>,
    pub scripted: Option<Arc<ScriptedProvider>>,
}

impl Rig {
    pub fn new(kind: Kind, scenario: &Value, mut config: AgentConfig) -> Rig {
        match kind {
            Kind::Scripted => {
                let p = Arc::new(ScriptedProvider::with_steps(scripted_steps(scenario)));
                Rig { kind, agent: Arc::new(Agent::new(p.clone(), config)), mock: None, scripted: Some(p) }
            }
            Kind::MockSse | Kind::MockJson => {
                config.stream = kind == Kind::MockSse;
                let mock = MockServer::start(scenario);
                Rig { kind, agent: Arc::new(Agent::new(anthropic(&mock), config)), mock: Some(mock), scripted: None }
            }
        }
    }

    /// One rig per backend kind.
    pub fn all(scenario: &Value, config: AgentConfig) -> Vec<Rig> {
        [Kind::Scripted, Kind::MockSse, Kind::MockJson]
            .into_iter()
            .map(|k| Rig::new(k, scenario, config.clone()))
            .collect()
    }

    /// Request bodies as the backend received them (the Messages API JSON shape).
    pub fn requests(&self) -> Vec<Value> {
        match (&self.mock, &self.scripted) {
            (Some(m), _) => m.requests().into_iter().map(|r| r["body"].clone()).collect(),
            (None, Some(s)) => s.requests().iter().map(|r| serde_json::to_value(r).unwrap()).collect(),
            _ => unreachable!(),
        }
    }

    /// The invariant on the agent's view and on every request that went out.
    pub fn check(&self) {
        assert_valid_view(&self.agent.messages());
        for body in self.requests() {
            if !body.is_null() {
                checked_messages(&body);
            }
        }
    }
}

pub fn weather_schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}, "units": {"type": "string"}}, "required": ["city"]})
}

/// get_weather: counts its calls.
pub fn weather_tool(calls: Arc<AtomicUsize>) -> Tool {
    Tool::new(
        "get_weather",
        "Current weather in a city.",
        weather_schema(),
        move |input: &Value, _: &ToolContext<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::Text(format!("18 °C, partly cloudy in {}", input["city"].as_str().unwrap_or("?"))))
        },
    )
    .unwrap()
}

pub fn tool_use(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: name.into(), input, extra: Default::default() })
}

/// `echo`: returns its `text` input, counting calls.
pub fn echo_tool(calls: Arc<AtomicUsize>) -> Tool {
    Tool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        move |input: &Value, _: &ToolContext<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::Text(input["text"].as_str().unwrap_or("").to_string()))
        },
    )
    .unwrap()
}
