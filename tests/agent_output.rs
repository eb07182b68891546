//! Structured output (`output_schema`) through the loop against the mock server, on both wires: the native
//! field (Anthropic `output_config.format`, OpenAI `response_format`) and the forced `final_answer` tool,
//! an invalid first answer corrected, retries exhausted (the last answer attached), tools in the same run,
//! and a subagent with a schema of its own whose value reaches the parent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use mock::MockServer;
use serde_json::{Value, json};
use tooloop::{Agent, AgentOptions, Error, Tool, ToolContext, ToolOutput};

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "city": {"type": "string"}, "temp_c": {"type": "number", "minimum": -90}},
        "required": ["city", "temp_c"]})
}

fn usage() -> Value {
    json!({"input_tokens": 10, "output_tokens": 5})
}

fn a_text(text: &str) -> Value {
    json!({"anthropic": {"id": "msg_t", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": usage()}})
}

fn a_call(id: &str, name: &str, input: Value) -> Value {
    json!({"anthropic": {"id": "msg_c", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": id, "name": name, "input": input}], "stop_reason": "tool_use",
        "stop_sequence": null, "usage": usage()}})
}

fn o_message(message: Value, finish: &str) -> Value {
    json!({"openai": {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}})
}

fn o_text(text: &str) -> Value {
    o_message(json!({"role": "assistant", "content": text}), "stop")
}

fn o_call(id: &str, name: &str, args: &str) -> Value {
    o_message(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": args}}]}),
        "tool_calls",
    )
}

fn build(mock: &MockServer, provider: &str, extra: Value) -> Agent {
    let base = if provider == "openai" { format!("{}/v1", mock.base_url()) } else { mock.base_url() };
    let mut o = json!({"provider": provider, "model": "claude-sonnet-4-6", "api_key": "sk-test", "base_url": base,
        "max_retries": 0, "cache": false, "output_schema": schema()});
    for (k, v) in extra.as_object().unwrap() {
        o[k] = v.clone();
    }
    AgentOptions::from_value(o).unwrap().build().unwrap()
}

fn weather_tool() -> Tool {
    Tool::new(
        "get_weather",
        "Weather of a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        |input: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text(format!("{}: 18 C", input["city"]))),
    )
    .unwrap()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().or(t["function"]["name"].as_str()).unwrap_or("").to_string())
        .collect()
}

#[test]
fn anthropic_native_sends_output_config_and_returns_the_parsed_value() {
    let mock = MockServer::start(&json!({"responses": [a_text("{\"city\": \"Paris\", \"temp_c\": 18}")]}));
    let agent = build(&mock, "anthropic", json!({}));
    let r = agent.run("Weather in Paris as JSON", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Paris", "temp_c": 18})));
    let body = &mock.requests()[0]["body"];
    let format = &body["output_config"]["format"];
    assert_eq!(format["type"], "json_schema");
    // Sent closed, with the constraint the API refuses moved into the description.
    assert_eq!(format["schema"]["additionalProperties"], false);
    assert!(format["schema"]["properties"]["temp_c"].get("minimum").is_none());
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "{body}");
    // The GA field needs no beta header.
    assert!(mock.requests()[0]["headers"].get("anthropic-beta").is_none());
}

#[test]
fn anthropic_tool_mode_forces_a_tool_and_takes_the_final_answer_input() {
    let mock = MockServer::start(&json!({"responses": [
        a_call("toolu_f", "final_answer", json!({"city": "Oslo", "temp_c": -3.5}))]}));
    let agent = build(&mock, "anthropic", json!({"output_mode": "tool"}));
    let r = agent.run("Weather in Oslo", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Oslo", "temp_c": -3.5})));
    // The same result as a native answer: the JSON as the text, a turn that ended.
    assert_eq!(serde_json::from_str::<Value>(&r.text).unwrap(), json!({"city": "Oslo", "temp_c": -3.5}));
    assert_eq!(r.stop_reason, Some(tooloop::StopReason::EndTurn));
    let body = &mock.requests()[0]["body"];
    assert_eq!(tool_names(body), vec!["final_answer"]);
    assert_eq!(body["tools"][0]["input_schema"], schema());
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert!(body.get("output_config").is_none());
    // The final_answer call has its result: the conversation stays valid for the next run.
    let last = agent.messages().last().cloned().unwrap();
    assert!(serde_json::to_string(&last).unwrap().contains("\"tool_result\""));
}

#[test]
fn openai_native_sends_response_format_json_schema() {
    let mock = MockServer::start(&json!({"responses": [o_text("{\"city\": \"Rome\", \"temp_c\": 25}")]}));
    let agent = build(&mock, "openai", json!({"output_mode": "native"}));
    let r = agent.run("Weather in Rome", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Rome", "temp_c": 25})));
    let body = &mock.requests()[0]["body"];
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["city", "temp_c"]));
    assert!(body.get("output_config").is_none(), "the neutral field is not sent on this wire: {body}");
}

#[test]
fn openai_compatible_local_server_gets_the_final_answer_tool_by_default() {
    let mock = MockServer::start(&json!({"responses": [
        o_call("call_1", "final_answer", "{\"city\": \"Lima\", \"temp_c\": 20}")]}));
    let agent = build(&mock, "openai", json!({}));
    let r = agent.run("Weather in Lima", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Lima", "temp_c": 20})));
    let body = &mock.requests()[0]["body"];
    assert_eq!(tool_names(body), vec!["final_answer"]);
    assert_eq!(body["tool_choice"], "required");
    assert!(body.get("response_format").is_none());
}

#[test]
fn a_first_invalid_answer_goes_back_with_the_errors_and_the_correction_is_taken() {
    for provider in ["anthropic", "openai"] {
        let (bad, good) = if provider == "anthropic" {
            (a_text("{\"city\": \"Paris\", \"temp_c\": \"warm\"}"), a_text("{\"city\": \"Paris\", \"temp_c\": 18}"))
        } else {
            (o_text("{\"city\": \"Paris\", \"temp_c\": \"warm\"}"), o_text("{\"city\": \"Paris\", \"temp_c\": 18}"))
        };
        let mock = MockServer::start(&json!({"responses": [bad, good]}));
        let agent = build(&mock, provider, json!({"output_mode": "native"}));
        let r = agent.run("Weather in Paris", &mut |_| {}).unwrap();
        assert_eq!(r.output, Some(json!({"city": "Paris", "temp_c": 18})), "{provider}");
        assert_eq!(r.turns, 2);
        let second = mock.requests()[1]["raw_body"].as_str().unwrap().to_string();
        assert!(second.contains("$.temp_c: must be of type number, got string"), "{provider}: {second}");
    }
}

#[test]
fn a_final_answer_call_that_is_invalid_gets_an_error_result_then_a_valid_one_ends_the_run() {
    let mock = MockServer::start(&json!({"responses": [
        o_call("call_1", "final_answer", "{\"city\": \"Lima\"}"),
        o_call("call_2", "final_answer", "{\"city\": \"Lima\", \"temp_c\": 21}")]}));
    let agent = build(&mock, "openai", json!({}));
    let r = agent.run("Weather in Lima", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Lima", "temp_c": 21})));
    let msgs = mock.requests()[1]["body"]["messages"].as_array().unwrap().clone();
    let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], "call_1");
    assert!(result["content"].as_str().unwrap().contains("missing required property \"temp_c\""), "{result}");
}

#[test]
fn retries_exhausted_fail_with_the_last_answer_and_a_valid_conversation() {
    let mock = MockServer::start(&json!({"responses": [
        a_text("not json at all"), a_text("{\"city\": 1}"), a_text("{\"city\": 2, \"temp_c\": null}")]}));
    let agent = build(&mock, "anthropic", json!({"output_retries": 2}));
    let err = agent.run("Weather", &mut |_| {}).unwrap_err();
    let Error::OutputValidation(f) = &err else { panic!("expected OutputValidation, got {err:?}") };
    assert_eq!(f.attempts, 3);
    assert_eq!(f.output, Some(json!({"city": 2, "temp_c": null})));
    assert_eq!(f.text, "{\"city\": 2, \"temp_c\": null}");
    assert!(f.errors.iter().any(|e| e.contains("$.city: must be of type string")), "{:?}", f.errors);
    assert_eq!(mock.requests().len(), 3, "no fourth request after the last retry");
    assert!(err.to_string().contains("after 3 attempts"), "{err}");

    // With no retries the first invalid answer fails, and a tool-mode answer leaves its call answered.
    let mock = MockServer::start(&json!({"responses": [a_call("toolu_x", "final_answer", json!({"city": 3}))]}));
    let agent = build(&mock, "anthropic", json!({"output_retries": 0, "output_mode": "tool"}));
    assert!(matches!(agent.run("Weather", &mut |_| {}), Err(Error::OutputValidation(_))));
    assert!(agent.conversation().pending_tool_uses().is_empty());
}

#[test]
fn tools_run_first_then_the_structured_answer() {
    for (provider, mode) in [("anthropic", "native"), ("anthropic", "tool"), ("openai", "tool"), ("openai", "native")] {
        let answer = json!({"city": "Paris", "temp_c": 18});
        let responses = match (provider, mode) {
            ("anthropic", "native") => {
                vec![a_call("t1", "get_weather", json!({"city": "Paris"})), a_text(&answer.to_string())]
            }
            ("anthropic", _) => vec![
                a_call("t1", "get_weather", json!({"city": "Paris"})),
                a_call("t2", "final_answer", answer.clone()),
            ],
            (_, "tool") => vec![
                o_call("c1", "get_weather", "{\"city\":\"Paris\"}"),
                o_call("c2", "final_answer", &answer.to_string()),
            ],
            _ => vec![o_call("c1", "get_weather", "{\"city\":\"Paris\"}"), o_text(&answer.to_string())],
        };
        let mock = MockServer::start(&json!({ "responses": responses }));
        let agent = build(&mock, provider, json!({"output_mode": mode}));
        agent.tools().register(weather_tool()).unwrap();
        let r = agent.run("Weather in Paris", &mut |_| {}).unwrap();
        assert_eq!(r.output, Some(answer), "{provider} {mode}");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "get_weather");
        let second = mock.requests()[1]["raw_body"].as_str().unwrap().to_string();
        assert!(second.contains("18 C"), "{provider} {mode}: the tool result reached the model");
        let names = tool_names(&mock.requests()[0]["body"]);
        assert_eq!(names.contains(&"final_answer".to_string()), mode == "tool", "{provider} {mode}: {names:?}");
    }
}

#[test]
fn a_subagent_with_its_own_schema_hands_its_value_to_the_parent() {
    let child_schema = json!({"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}},
        "required": ["files"]});
    let mock = MockServer::start(&json!({"responses": [
        // parent: starts a task
        a_call("p1", "task", json!({"description": "find", "prompt": "list the rust files", "agent_type": "lister"})),
        // child: first answer invalid, then valid
        a_text("{\"files\": \"main.rs\"}"),
        a_text("{\"files\": [\"main.rs\", \"lib.rs\"]}"),
        // parent: its own structured answer
        a_text("{\"city\": \"Paris\", \"temp_c\": 2}"),
    ]}));
    let agent = build(
        &mock,
        "anthropic",
        json!({"subagents": {"lister": {
        "description": "Lists files", "output_schema": child_schema}}}),
    );
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Paris", "temp_c": 2})));
    let reqs = mock.requests();
    // The child's requests carry the child's schema, never the parent's.
    assert_eq!(reqs[1]["body"]["output_config"]["format"]["schema"]["required"], json!(["files"]));
    assert!(reqs[2]["raw_body"].as_str().unwrap().contains("$.files: must be of type array"));
    // The parent receives the child's validated value as the task result.
    let parent = &reqs[3]["body"]["messages"];
    let result = parent
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|m| m["content"].as_array().and_then(|c| c.iter().find(|b| b["type"] == "tool_result").cloned()));
    let content = result.unwrap()["content"].clone();
    let text = content.as_str().map(str::to_string).unwrap_or_else(|| content[0]["text"].as_str().unwrap().to_string());
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"files": ["main.rs", "lib.rs"]}));
    assert_eq!(reqs[3]["body"]["output_config"]["format"]["schema"]["required"], json!(["city", "temp_c"]));
}

#[test]
fn a_bad_schema_or_mode_is_refused_when_the_agent_is_built() {
    for (options, key) in [
        (json!({"output_schema": "a string"}), "output_schema"),
        (json!({"output_schema": {"$ref": "#/$defs/Nope"}}), "output_schema"),
        (json!({"output_mode": "json"}), "output_mode"),
        (json!({"output_retries": -1}), "output_retries"),
    ] {
        match AgentOptions::from_value(options.clone()) {
            Err(Error::InvalidOption { key: k, .. }) => assert_eq!(k, key, "{options}"),
            other => panic!("{options}: expected InvalidOption, got {other:?}"),
        }
    }
}

#[test]
fn bedrock_gets_the_final_answer_tool_by_default() {
    use tooloop::provider::{AwsCredentials, Protocol, ProviderConfig};
    let mut response = a_call("toolu_b", "final_answer", json!({"city": "Bern", "temp_c": 9}));
    response["bedrock"] = json!({"check": false});
    let mock = MockServer::start(&json!({ "responses": [response] }));
    let config = ProviderConfig {
        base_url: Some(mock.base_url()),
        region: Some("us-west-2".into()),
        aws_credentials: Some(AwsCredentials::new("AKIDMOCK", "secret", None)),
        ..ProviderConfig::new(Protocol::Bedrock)
    };
    let agent = Agent::new(
        config.build().unwrap(),
        tooloop::AgentConfig {
            model: "us.anthropic.claude-sonnet-4-6-v1:0".into(),
            cache: false,
            output: Some(tooloop::output::OutputSpec::new(schema())),
            ..Default::default()
        },
    );
    let r = agent.run("Weather in Bern", &mut |_| {}).unwrap();
    assert_eq!(r.output, Some(json!({"city": "Bern", "temp_c": 9})));
    let body = &mock.requests()[0]["body"];
    assert_eq!(tool_names(body), vec!["final_answer"]);
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert!(body.get("output_config").is_none(), "{body}");
}
