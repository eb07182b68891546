/*
 * tooloop.hpp — a header-only C++17 wrapper over the C API in tooloop.h (libtooloop).
 *
 * RAII handles, std::string in and out, tools and models as std::function, errors as exceptions:
 *
 *     tooloop::Agent agent(R"({"model": "claude-sonnet-4-6"})");
 *     agent.add_tool("get_time", "Get the current time.", R"({"type": "object"})",
 *                    [](const std::string &input_json) { return std::string("14:05"); });
 *     tooloop::RunResult r = agent.run("What time is it?", [](const tooloop::Event &e) {
 *         if (e.type == TOOLOOP_EVENT_TEXT) std::cout << e.text << std::flush;
 *     });
 *
 * Errors. Every failing call throws tooloop::Error (a std::runtime_error) carrying the C status
 *   (tooloop::Error::status(), one of the TOOLOOP_* codes) and the detail of tooloop_last_error().
 *
 * Tools. A tool is a std::function<std::string(const std::string &input_json)>. Its return value is the
 *   result the model reads. A std::exception it throws becomes an error result the model reads (is_error,
 *   the run goes on); throwing tooloop::AbortRun ends the run (run() throws tooloop::Error with
 *   TOOLOOP_TOOL_ABORTED). No exception ever crosses into the C library.
 *
 * Events. The optional event function sees each tooloop::Event (copied strings). If it throws, the run is
 *   cancelled and run() rethrows that exception.
 *
 * Host model. Agent(config, model) takes a std::function<std::string(const std::string &request_json)>
 *   that returns a Messages API message as JSON (see tooloop_model_fn). If it throws, run() rethrows.
 *
 * Permission. set_permission(fn) takes a std::function<std::optional<std::string>(const ToolCall &call)>
 *   asked before each tool call (see tooloop_permission_fn): std::nullopt lets the call run; a string
 *   denies it, and the model reads "Permission denied: <the string>" (an empty string: the default reason,
 *   "the host denied this tool call"). An empty function clears the hook. If it throws, the call is denied
 *   ("the permission check failed"), the run is cancelled and run() rethrows that exception: a check that
 *   fails is a host bug, which must neither let the call run nor pass as an ordinary denial the model
 *   works around (the same as the Python hook). Set it through set_permission only, not through the C
 *   call on get().
 *
 * Stepping. agent.start(input) gives a tooloop::Run the host steps from its own loop (run.step(on_event) until
 *   Run::Step::Done, then run.result()); started pausing (the default), a tool call that needs a decision
 *   makes step() return Run::Step::NeedsApproval: read run.pending_approvals(), answer each with allow(id),
 *   allow_read_only(id) or deny(id, reason), step again. Destroying a Run part-way cancels it (the
 *   conversation stays valid). Destroy every Run before its Agent.
 *
 * Threads: as the C API. One Agent, one thread at a time, except cancel() and the *_json() readers, which
 *   any thread may call while a run is in progress. Callbacks run on the thread that called run().
 *
 * Build: c++ -std=c++17 app.cpp $(pkg-config --cflags --libs tooloop)
 */
#ifndef TOOLOOP_HPP
#define TOOLOOP_HPP

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tooloop.h"

namespace tooloop {

/** A failed tooloop call: the C status and the library's detail message. */
class Error : public std::runtime_error {
public:
    Error(tooloop_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    /** One of the TOOLOOP_* codes. */
    tooloop_status status() const noexcept { return status_; }

private:
    tooloop_status status_;
};

/** Throw from a tool to end the run on purpose (run() then throws Error with TOOLOOP_TOOL_ABORTED). */
class AbortRun : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** One event of a run (a copy: keep it as long as you like). */
struct Event {
    /** One of the TOOLOOP_EVENT_* codes. */
    tooloop_event_type type;
    /** The text delta (TEXT, THINKING) or JSON fragment (TOOL_INPUT_DELTA); empty for other types. */
    std::string text;
    /** The whole event as JSON, e.g. {"type":"tool_use","id":"...","name":"...","input":{...}}. */
    std::string json;
};

/** What a successful run returns. */
struct RunResult {
    /** The text of the last assistant turn (the answer). */
    std::string text;
    /** Why the last turn stopped ("end_turn", "max_tokens", ...); empty when max_turns stopped it. */
    std::string stop_reason;
    /** Model requests made in this run. */
    int turns = 0;
    /** The structured answer as compact JSON (config "output_schema"), or "null" without one. */
    std::string output_json = "null";
    /** The whole result as JSON (see tooloop_agent_run). */
    std::string json;
};

using ToolFn = std::function<std::string(const std::string &input_json)>;
using EventFn = std::function<void(const Event &event)>;
using ModelFn = std::function<std::string(const std::string &request_json)>;

/** A tool call as the permission hook sees it (copies). */
struct ToolCall {
    /** The call id, e.g. "toolu_01...". */
    std::string id;
    /** The tool's name (also for a tool the agent does not know). */
    std::string name;
    /** The input the model wrote, as JSON (read it with json_get). */
    std::string input_json;
    /** The whole call as JSON: {"id": ..., "name": ..., "input": {...}}. */
    std::string json;
};

/** std::nullopt allows the call; a string denies it with that reason (empty: the default reason). */
using PermissionFn = std::function<std::optional<std::string>(const ToolCall &call)>;

namespace detail {

/** Throw Error for a failed status, with the detail of this thread's last error. */
inline void check(tooloop_status status) {
    if (status != TOOLOOP_OK) {
        const char *detail = tooloop_last_error();
        throw Error(status, (detail != nullptr && *detail != '\0') ? detail : tooloop_status_str(status));
    }
}

/** Take ownership of a string from the library: copy it, free it. */
inline std::string take(char *s) {
    std::string out = s != nullptr ? s : "";
    tooloop_string_free(s);
    return out;
}

struct ModelBox {
    ModelFn fn;
    std::exception_ptr error;
};

struct PermissionBox {
    PermissionFn fn;
    std::exception_ptr error;
    tooloop_agent *agent; // to cancel the run when fn throws
};

struct RunContext {
    const EventFn *on_event;
    std::exception_ptr error;
    tooloop_agent *agent;
};

} // namespace detail

/** The value at a JSON Pointer ("/text", "/tool_calls/0/name") as text, or nullopt when there is none. */
inline std::optional<std::string> json_get(const std::string &json, const std::string &pointer) {
    char *out = nullptr;
    tooloop_status s = tooloop_json_get(json.c_str(), pointer.c_str(), &out);
    if (s == TOOLOOP_NO_VALUE) {
        return std::nullopt;
    }
    detail::check(s);
    return detail::take(out);
}

/** The library version, e.g. "0.1.0". */
inline std::string version() { return tooloop_version(); }

} // namespace tooloop

/* The callbacks handed to the C library: C linkage, and no exception ever leaves them. */
extern "C" inline int32_t tooloop_hpp_tool(void *userdata, const char *input_json, tooloop_tool_result *result) {
    auto *fn = static_cast<tooloop::ToolFn *>(userdata);
    try {
        std::string out = (*fn)(input_json);
        tooloop_tool_result_set_text(result, out.c_str());
        return 0;
    } catch (const tooloop::AbortRun &e) {
        tooloop_tool_result_set_error(result, e.what());
        return 1;
    } catch (const std::exception &e) {
        tooloop_tool_result_set_error(result, e.what());
        return 0;
    } catch (...) {
        tooloop_tool_result_set_error(result, "the tool threw a C++ exception that is not a std::exception");
        return 0;
    }
}

extern "C" inline void tooloop_hpp_tool_free(void *userdata) { delete static_cast<tooloop::ToolFn *>(userdata); }

extern "C" inline int32_t tooloop_hpp_model(void *userdata, const char *request_json,
                                            tooloop_model_response *response) {
    auto *box = static_cast<tooloop::detail::ModelBox *>(userdata);
    try {
        std::string out = box->fn(request_json);
        tooloop_model_response_set_json(response, out.c_str());
        return 0;
    } catch (...) {
        box->error = std::current_exception();
        return 1;
    }
}

extern "C" inline void tooloop_hpp_model_free(void *userdata) {
    delete static_cast<tooloop::detail::ModelBox *>(userdata);
}

extern "C" inline int32_t tooloop_hpp_permission(void *userdata, const char *call_json,
                                                 tooloop_permission *answer) {
    auto *box = static_cast<tooloop::detail::PermissionBox *>(userdata);
    try {
        tooloop::ToolCall call;
        call.id = tooloop::json_get(call_json, "/id").value_or("");
        call.name = tooloop::json_get(call_json, "/name").value_or("");
        call.input_json = tooloop::json_get(call_json, "/input").value_or("{}");
        call.json = call_json;
        std::optional<std::string> denial = box->fn(call);
        if (!denial) {
            return 0;
        }
        if (!denial->empty()) {
            tooloop_permission_set_reason(answer, denial->c_str());
        }
        return 1;
    } catch (...) {
        if (!box->error) {
            box->error = std::current_exception();
        }
        tooloop_permission_set_reason(answer, "the permission check failed");
        tooloop_agent_cancel(box->agent);
        return 1;
    }
}

extern "C" inline void tooloop_hpp_permission_free(void *userdata) {
    delete static_cast<tooloop::detail::PermissionBox *>(userdata);
}

extern "C" inline void tooloop_hpp_event(void *userdata, const tooloop_event *event) {
    auto *ctx = static_cast<tooloop::detail::RunContext *>(userdata);
    if (ctx->error) {
        return;
    }
    try {
        tooloop::Event e{event->type, event->text != nullptr ? event->text : "", event->json};
        (*ctx->on_event)(e);
    } catch (...) {
        ctx->error = std::current_exception();
        tooloop_agent_cancel(ctx->agent);
    }
}

namespace tooloop {

namespace detail {

/** A run's result JSON as a RunResult. */
inline RunResult run_result(std::string json) {
    RunResult r;
    r.text = json_get(json, "/text").value_or("");
    std::optional<std::string> stop = json_get(json, "/stop_reason");
    r.stop_reason = (stop && *stop != "null") ? *stop : "";
    r.turns = std::stoi(json_get(json, "/turns").value_or("0"));
    r.output_json = json_get(json, "/output").value_or("null");
    r.json = std::move(json);
    return r;
}

} // namespace detail

/** A tool call waiting for the host's answer in a stepped run (see tooloop_run_pending_approvals). */
struct ApprovalRequest {
    /** The call id: what allow/deny take. */
    std::string call_id;
    /** The tool's name. */
    std::string tool;
    /** The input the call would run with, as JSON. */
    std::string input_json;
    /** The permission rule that asks; empty when every undecided call asks. */
    std::string reason;
    /** Whether the tool says it only reads. */
    bool read_only = false;
};

/** A run the host steps (RAII over tooloop_run *), from Agent::start. Movable, not copyable. One thread at a
 *  time; cancel() from any thread. Destroying it part-way cancels the run (the conversation stays valid). */
class Run {
public:
    /** What a step came to. */
    enum class Step { Continue, NeedsApproval, Done };

    ~Run() { tooloop_run_free(handle_); }
    Run(const Run &) = delete;
    Run &operator=(const Run &) = delete;
    Run(Run &&other) noexcept
        : handle_(std::exchange(other.handle_, nullptr)), agent_(other.agent_), model_(other.model_),
          permission_(other.permission_) {}
    Run &operator=(Run &&other) noexcept {
        if (this != &other) {
            tooloop_run_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
            agent_ = other.agent_;
            model_ = other.model_;
            permission_ = other.permission_;
        }
        return *this;
    }

    /** One step (see tooloop_run_step); its events go to on_event. Throws Error (TOOLOOP_RUN_ENDED after
     *  Done), or what the event function, host model or permission hook threw (the run is cancelled then). */
    Step step(const EventFn &on_event = nullptr) {
        detail::RunContext ctx{&on_event, nullptr, agent_};
        tooloop_event_fn cb = on_event ? tooloop_hpp_event : nullptr;
        tooloop_step_kind kind = TOOLOOP_STEP_CONTINUE;
        tooloop_status s = tooloop_run_step(handle_, cb, &ctx, &kind);
        std::exception_ptr model_error = model_ != nullptr ? std::exchange(model_->error, nullptr) : nullptr;
        std::exception_ptr permission_error =
            permission_ != nullptr ? std::exchange(permission_->error, nullptr) : nullptr;
        if (ctx.error) {
            std::rethrow_exception(ctx.error);
        }
        if (model_error) {
            std::rethrow_exception(model_error);
        }
        if (permission_error) {
            std::rethrow_exception(permission_error);
        }
        detail::check(s);
        return kind == TOOLOOP_STEP_DONE ? Step::Done
               : kind == TOOLOOP_STEP_NEEDS_APPROVAL ? Step::NeedsApproval
                                                      : Step::Continue;
    }

    /** The calls waiting for an answer (empty when none). */
    std::vector<ApprovalRequest> pending_approvals() const {
        char *out = nullptr;
        detail::check(tooloop_run_pending_approvals(handle_, &out));
        std::string json = detail::take(out);
        std::vector<ApprovalRequest> calls;
        for (size_t i = 0;; i++) {
            std::string at = "/" + std::to_string(i);
            std::optional<std::string> id = json_get(json, at + "/call_id");
            if (!id) {
                break;
            }
            ApprovalRequest r;
            r.call_id = *id;
            r.tool = json_get(json, at + "/tool").value_or("");
            r.input_json = json_get(json, at + "/input").value_or("{}");
            std::string reason = json_get(json, at + "/reason").value_or("null");
            r.reason = reason == "null" ? "" : reason;
            r.read_only = json_get(json, at + "/read_only").value_or("false") == "true";
            calls.push_back(std::move(r));
        }
        return calls;
    }

    /** Let a waiting call run. Throws Error (TOOLOOP_UNKNOWN_CALL, TOOLOOP_RUN_ENDED). */
    void allow(const std::string &call_id) {
        detail::check(tooloop_run_approve(handle_, call_id.c_str(), TOOLOOP_DECISION_ALLOW, nullptr));
    }
    /** Let a waiting call run with no power to change anything. */
    void allow_read_only(const std::string &call_id) {
        detail::check(tooloop_run_approve(handle_, call_id.c_str(), TOOLOOP_DECISION_ALLOW_READ_ONLY, nullptr));
    }
    /** Refuse a waiting call; the model reads "Permission denied: <reason>" (empty: the default reason). */
    void deny(const std::string &call_id, const std::string &reason = "") {
        detail::check(tooloop_run_approve(handle_, call_id.c_str(), TOOLOOP_DECISION_DENY,
                                          reason.empty() ? nullptr : reason.c_str()));
    }

    /** The outcome once step() said Done: the result, or Error with the run's status (TOOLOOP_CANCELLED,
     *  ...; TOOLOOP_RUN_NOT_ENDED before the end). */
    RunResult result() const {
        char *out = nullptr;
        detail::check(tooloop_run_result(handle_, &out));
        return detail::run_result(detail::take(out));
    }

    /** Cancel the run, from any thread: the next step ends it. */
    void cancel() noexcept { tooloop_run_cancel(handle_); }

    /** The C handle. Still owned by this Run. */
    tooloop_run *get() const noexcept { return handle_; }

private:
    friend class Agent;
    Run(tooloop_run *handle, tooloop_agent *agent, detail::ModelBox *model, detail::PermissionBox *permission)
        : handle_(handle), agent_(agent), model_(model), permission_(permission) {}

    tooloop_run *handle_ = nullptr;
    tooloop_agent *agent_ = nullptr;
    detail::ModelBox *model_ = nullptr;
    detail::PermissionBox *permission_ = nullptr;
};

/** An agent (RAII over tooloop_agent *). Movable, not copyable. */
class Agent {
public:
    /** An agent for a model API; config_json as tooloop_agent_new. Throws Error. */
    explicit Agent(const std::string &config_json) {
        detail::check(tooloop_agent_new(config_json.c_str(), &handle_));
    }

    /** An agent whose model is `model` (the "fake brain"); config_json as tooloop_agent_new_with_model. */
    Agent(const std::string &config_json, ModelFn model) {
        auto *box = new detail::ModelBox{std::move(model), nullptr};
        // On failure the library has already freed box through tooloop_hpp_model_free.
        detail::check(tooloop_agent_new_with_model(config_json.c_str(), tooloop_hpp_model, box,
                                                   tooloop_hpp_model_free, &handle_));
        model_ = box;
    }

    ~Agent() { tooloop_agent_free(handle_); }

    Agent(const Agent &) = delete;
    Agent &operator=(const Agent &) = delete;

    Agent(Agent &&other) noexcept
        : handle_(std::exchange(other.handle_, nullptr)), model_(std::exchange(other.model_, nullptr)),
          permission_(std::exchange(other.permission_, nullptr)) {}

    Agent &operator=(Agent &&other) noexcept {
        if (this != &other) {
            tooloop_agent_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
            model_ = std::exchange(other.model_, nullptr);
            permission_ = std::exchange(other.permission_, nullptr);
        }
        return *this;
    }

    /** Register a tool (see the file comment for results and exceptions). Throws Error. */
    void add_tool(const std::string &name, const std::string &description, const std::string &schema_json,
                  ToolFn fn) {
        auto *box = new ToolFn(std::move(fn));
        // On failure the library has already freed box through tooloop_hpp_tool_free.
        detail::check(tooloop_agent_add_tool(handle_, name.c_str(), description.c_str(), schema_json.c_str(),
                                             tooloop_hpp_tool, box, tooloop_hpp_tool_free));
    }

    /** Set the permission hook (see the file comment), replacing any previous one; an empty function
     *  clears it. Not during a run: throws Error with TOOLOOP_BUSY then (also from inside a callback). */
    void set_permission(PermissionFn fn) {
        if (!fn) {
            detail::check(tooloop_agent_set_permission(handle_, nullptr, nullptr, nullptr));
            permission_ = nullptr;
            return;
        }
        auto *box = new detail::PermissionBox{std::move(fn), nullptr, handle_};
        // On failure the library has already freed box through tooloop_hpp_permission_free, and the
        // previous hook is still in place.
        detail::check(tooloop_agent_set_permission(handle_, tooloop_hpp_permission, box, tooloop_hpp_permission_free));
        permission_ = box;
    }

    /** Run on new user input. Throws Error (status TOOLOOP_CANCELLED, TOOLOOP_MAX_TURNS, API codes, ...),
     *  or what the event function, host model or permission hook threw. */
    RunResult run(const std::string &input, const EventFn &on_event = nullptr) {
        return drive(&input, on_event);
    }

    /** Continue after a failure, a cancel or max_turns (see tooloop_agent_resume). */
    RunResult resume(const EventFn &on_event = nullptr) { return drive(nullptr, on_event); }

    /** Start a run to step (see tooloop_agent_start and the file comment); pause_for_approval: a tool call
     *  that needs a decision pauses the run instead of going to the permission hook. Throws Error. */
    Run start(const std::string &input, bool pause_for_approval = true) { return begin(&input, pause_for_approval); }
    /** start() resuming the conversation (see tooloop_agent_resume). */
    Run start_resume(bool pause_for_approval = true) { return begin(nullptr, pause_for_approval); }

    /** Cancel the run in progress, from any thread. */
    void cancel() noexcept { tooloop_agent_cancel(handle_); }

    /** The API view of the conversation (JSON array of messages). Any thread. */
    std::string messages_json() const { return read(tooloop_agent_messages_json); }
    /** The internal entries (JSON array). Any thread. */
    std::string history_json() const { return read(tooloop_agent_history_json); }
    /** Cumulative usage (JSON object). Any thread. */
    std::string usage_json() const { return read(tooloop_agent_usage_json); }

    /** Compact the conversation now (the older turns summarized, or dropped if the summary fails): the
     * compaction record as JSON, or "null" when there was nothing to compact. Blocks; tooloop_agent_cancel
     * stops it. Throws Error (TOOLOOP_BUSY during a run). */
    std::string compact(const std::string &instructions = "") {
        char *out = nullptr;
        detail::check(tooloop_agent_compact(handle_, instructions.empty() ? nullptr : instructions.c_str(), &out));
        return detail::take(out);
    }
    /** Tokens the next request would carry (with `input` added as a user message, if not empty): counted by
     * the API where it offers it (Anthropic), else estimated. */
    uint64_t count_tokens(const std::string &input = "") const {
        uint64_t n = 0;
        detail::check(tooloop_agent_count_tokens(handle_, input.empty() ? nullptr : input.c_str(), &n));
        return n;
    }
    /** The context window compaction works with, in tokens (0: unknown). Any thread. */
    uint64_t context_window() const {
        uint64_t n = 0;
        detail::check(tooloop_agent_context_window(handle_, &n));
        return n;
    }

    /** Load a session file and append to it from now on (conversation must be empty). */
    void open_session(const std::string &path) { detail::check(tooloop_agent_open_session(handle_, path.c_str())); }
    /** Write the whole conversation to a session file. */
    void save_session(const std::string &path) const {
        detail::check(tooloop_agent_save_session(handle_, path.c_str()));
    }
    /** Clear the conversation. */
    void reset() { detail::check(tooloop_agent_reset(handle_)); }

    /** The C handle, for C calls not wrapped here. Still owned by this Agent. */
    tooloop_agent *get() const noexcept { return handle_; }

private:
    tooloop_agent *handle_ = nullptr;
    detail::ModelBox *model_ = nullptr; // owned by the C agent (freed with it)
    detail::PermissionBox *permission_ = nullptr; // owned by the C agent (freed when replaced or with it)

    std::string read(tooloop_status (*fn)(const tooloop_agent *, char **)) const {
        char *out = nullptr;
        detail::check(fn(handle_, &out));
        return detail::take(out);
    }

    Run begin(const std::string *input, bool pause_for_approval) {
        tooloop_run *run = nullptr;
        detail::check(tooloop_agent_start(handle_, input != nullptr ? input->c_str() : nullptr,
                                          pause_for_approval ? TOOLOOP_RUN_PAUSE_FOR_APPROVAL : 0, &run));
        return Run(run, handle_, model_, permission_);
    }

    RunResult drive(const std::string *input, const EventFn &on_event) {
        detail::RunContext ctx{&on_event, nullptr, handle_};
        tooloop_event_fn cb = on_event ? tooloop_hpp_event : nullptr;
        char *out = nullptr;
        tooloop_status s = input != nullptr ? tooloop_agent_run(handle_, input->c_str(), cb, &ctx, &out)
                                            : tooloop_agent_resume(handle_, cb, &ctx, &out);
        std::string detail_message = s != TOOLOOP_OK ? tooloop_last_error() : "";
        std::string json = detail::take(out);
        // Taken out before rethrowing any of them, so none is left behind for a later run to throw.
        std::exception_ptr model_error = model_ != nullptr ? std::exchange(model_->error, nullptr) : nullptr;
        std::exception_ptr permission_error =
            permission_ != nullptr ? std::exchange(permission_->error, nullptr) : nullptr;
        if (ctx.error) {
            std::rethrow_exception(ctx.error);
        }
        if (model_error) {
            std::rethrow_exception(model_error);
        }
        if (permission_error) {
            std::rethrow_exception(permission_error);
        }
        if (s != TOOLOOP_OK) {
            throw Error(s, detail_message.empty() ? tooloop_status_str(s) : detail_message);
        }
        return detail::run_result(std::move(json));
    }
};

} // namespace tooloop

#endif /* TOOLOOP_HPP */
