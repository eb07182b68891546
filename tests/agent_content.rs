//! Images and documents through the loop against the mock server: user input blocks and a tool's image
//! result reach the request byte for byte on both wires (Chat Completions carries a tool's image in the user
//! message after the tool messages); an over-size image is refused before anything is stored or sent, and
//! an over-size tool image becomes an error result the model reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use mock::MockServer;
use serde_json::{Value, json};
use tooloop::{Agent, AgentOptions, ContentBlock, Error, Tool, ToolContext, ToolOutput};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const GIF: &str = "R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==";

fn image(media: &str, data: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
}

fn build(mock: &MockServer, provider: &str) -> Agent {
    let base = if provider == "openai" { format!("{}/v1", mock.base_url()) } else { mock.base_url() };
    let o = json!({"provider": provider, "model": "claude-sonnet-4-6", "api_key": "sk-test", "base_url": base,
        "max_retries": 0, "cache": false});
    let agent = AgentOptions::from_value(o).unwrap().build().unwrap();
    agent
        .tools()
        .register(
            Tool::new("screenshot", "", json!({"type": "object"}), |input: &Value, _: &ToolContext<'_>| {
                let big = input.get("big").and_then(Value::as_bool).unwrap_or(false);
                let data = if big { "A".repeat(8 * 1024 * 1024) } else { GIF.to_string() };
                Ok(ToolOutput::Blocks(vec![json!({"type": "text", "text": "screen:"}), image("image/gif", &data)]))
            })
            .unwrap(),
        )
        .unwrap();
    agent
}

fn responses(provider: &str, input: Value) -> Value {
    if provider == "openai" {
        json!({"responses": [
            {"openai": {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0,
                "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_s", "type": "function", "function": {"name": "screenshot", "arguments": input.to_string()}}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}},
            {"openai": {"id": "c2", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0,
                "finish_reason": "stop", "message": {"role": "assistant", "content": "a pixel"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}}]})
    } else {
        json!({"responses": [
            {"anthropic": {"id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                "content": [{"type": "tool_use", "id": "call_s", "name": "screenshot", "input": input}],
                "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 2}}},
            {"anthropic": {"id": "m2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": "a pixel"}], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 3, "output_tokens": 2}}}]})
    }
}

#[test]
fn input_images_and_tool_images_reach_the_request_byte_for_byte_on_both_wires() {
    for provider in ["anthropic", "openai"] {
        let mock = MockServer::start(&responses(provider, json!({})));
        let agent = build(&mock, provider);
        let input = vec![
            serde_json::from_value::<ContentBlock>(image("image/png", PNG)).unwrap(),
            ContentBlock::text("what is this?"),
        ];
        let r = agent.run_with(input, &mut |_| {}).unwrap();
        assert_eq!(r.text, "a pixel");
        let reqs = mock.requests();
        let first = reqs[0]["raw_body"].as_str().unwrap();
        let second = reqs[1]["raw_body"].as_str().unwrap();
        if provider == "anthropic" {
            assert!(first.contains(&format!("\"media_type\":\"image/png\",\"data\":\"{PNG}\"")), "{first}");
            let result = &reqs[1]["body"]["messages"][2]["content"][0];
            assert_eq!(result["type"], "tool_result");
            assert_eq!(result["content"][1], image("image/gif", GIF));
        } else {
            assert!(first.contains(&format!("data:image/png;base64,{PNG}")), "{first}");
            assert!(second.contains(&format!("data:image/gif;base64,{GIF}")), "{second}");
            let msgs = reqs[1]["body"]["messages"].as_array().unwrap();
            let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
            assert_eq!(roles, ["user", "assistant", "tool", "user"], "{provider}");
        }
    }
}

#[test]
fn an_over_size_image_is_refused_before_anything_is_stored_or_sent() {
    let mock = MockServer::start(&json!({"responses": []}));
    let agent = build(&mock, "anthropic");
    let big = "A".repeat(5 * 1024 * 1024 * 4 / 3 + 8);
    let input = vec![serde_json::from_value::<ContentBlock>(image("image/png", &big)).unwrap()];
    let err = agent.run_with(input, &mut |_| {}).unwrap_err();
    assert!(matches!(&err, Error::Config(m) if m.contains("over the Anthropic limit of 5.00 MB")), "{err}");
    assert!(mock.requests().is_empty());
    assert!(agent.conversation().is_empty(), "nothing stored");
}

#[test]
fn an_over_size_tool_image_becomes_an_error_result() {
    let mock = MockServer::start(&responses("anthropic", json!({"big": true})));
    let agent = build(&mock, "anthropic");
    let r = agent.run("take a screenshot", &mut |_| {}).unwrap();
    assert!(r.tool_calls[0].is_error);
    let result = &mock.requests()[1]["body"]["messages"][2]["content"][0];
    assert_eq!(result["is_error"], true);
    assert!(result["content"].as_str().unwrap().contains("over the Anthropic limit"), "{result}");
    assert!(mock.requests()[1]["raw_body"].as_str().unwrap().len() < 100_000);
}
