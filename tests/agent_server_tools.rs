//! Server tools (tools the API runs itself, defined by a `type` and without `input_schema`) through the agent
//! loop against the mock server: sent as given next to the registered tools, their `server_tool_use` and
//! `*_tool_result` blocks sent back verbatim, never run locally, `pause_turn` continued.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mock::scenario;
use serde_json::{Value, json};
use tooloop::{AgentConfig, Event, Request, StopReason};

#[path = "common/agent.rs"]
mod common;
use common::*;

fn server_tools() -> Vec<Value> {
    vec![
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3}),
        json!({"type": "code_execution_20250522", "name": "code_execution"}),
    ]
}

#[test]
fn server_tools_are_sent_as_given_and_their_blocks_round_trip_without_running_locally() {
    let scen = scenario("agent_server_tools");
    let cfg = AgentConfig { server_tools: server_tools(), ..config() };
    for kind in [Kind::MockSse, Kind::MockJson] {
        let rig = Rig::new(kind, &scen, cfg.clone());
        let calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(calls.clone())).unwrap();
        let mut tool_events = Vec::new();
        let result = rig
            .agent
            .run("Weather in Paris?", &mut |e| {
                if let Event::ToolUse { name, .. } = e {
                    tool_events.push(name.clone());
                }
            })
            .unwrap();
        assert_eq!((result.turns, result.stop_reason.clone()), (3, Some(StopReason::EndTurn)), "{kind:?}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{kind:?}: only the local tool runs");
        assert_eq!(tool_events, vec!["get_weather"], "{kind:?}: server tool calls are not ours to run");

        let requests = rig.requests();
        assert_eq!(requests.len(), 3, "{kind:?}");
        for body in &requests {
            let tools = body["tools"].as_array().unwrap();
            assert_eq!(tools.len(), 3, "{kind:?}: {tools:?}");
            assert_eq!(tools[0]["name"], "get_weather");
            assert_eq!(&tools[1..], &server_tools()[..], "{kind:?}: server tools go out exactly as given");
            // The whole body is a valid neutral request too (a raw client can resend it).
            serde_json::from_value::<Request>(body.clone()).unwrap();
        }
        // pause_turn: the paused turn goes back verbatim, with no tool_result for the server tool.
        let paused = &scen["responses"][0]["anthropic"]["content"];
        assert_eq!(requests[1]["messages"][1]["content"], *paused, "{kind:?}");
        assert_eq!(requests[1]["messages"].as_array().unwrap().len(), 2, "{kind:?}");
        // Turn 2 mixes server blocks and a local call. The continued turn is one assistant message (the view
        // merges the paused turn with its continuation): every block goes back, and one tool_result answers
        // the local call.
        let mut both = paused.as_array().unwrap().clone();
        both.extend(scen["responses"][1]["anthropic"]["content"].as_array().unwrap().iter().cloned());
        let third = requests[2]["messages"].as_array().unwrap();
        assert_eq!(third.len(), 3, "{kind:?}: {third:?}");
        assert_eq!(third[1]["content"], Value::Array(both), "{kind:?}");
        assert_eq!(
            results_of(&third[2]),
            vec![("toolu_01C".to_string(), "18 °C, partly cloudy in Paris".to_string(), false)],
            "{kind:?}"
        );
        rig.check();
    }
}
