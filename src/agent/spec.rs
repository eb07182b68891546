//! What an agent is made of, put together once: [`AgentBuilder`] turns the options (or a `task` call's
//! child type) into an [`AgentSpec`] — its settings, its system prompt from named sections, its tools, where
//! switched-to providers get their keys, its store — and the [`Agent`] around it, in one pass. Nothing is
//! added to an agent after it is handed out.
//!
//! The system prompt is assembled here and nowhere else: the host's own prompt, then the sections named in
//! [`PROMPT_SECTIONS`], in that order, each only when it has text.
//!
//! Must never: change an agent's spec once built. (The deprecated setters of [`Agent`] that set what the
//! spec holds — `set_workspace`, `set_skills`, … — swap in a changed copy; the options never use them.)

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;

/// The sections added to the host's system prompt, in the order they come after it: what the built-in
/// `bash`'s sandbox allows, the skills on offer, the MCP servers' instructions, the project's instruction
/// files.
pub const PROMPT_SECTIONS: [&str; 4] = ["sandbox", "skills", "mcp", "instructions"];

/// One named part of the system prompt the builder added (see [`PROMPT_SECTIONS`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptSection {
    /// One of [`PROMPT_SECTIONS`].
    pub name: &'static str,
    /// The text, redacted of secrets where it was read from files or servers.
    pub text: String,
}

/// What an agent was built from: made once by the builder behind [`AgentOptions::build`](crate::AgentOptions)
/// (and [`Agent::new`]), never changed after. What the host changes later (the model, the config, hooks,
/// the permission callable) lives beside it in the agent, not in here.
///
/// # Threads and cloning
/// Plain data behind an `Arc` ([`Agent::spec`]); `Send + Sync`.
#[derive(Clone)]
pub struct AgentSpec {
    /// The settings the agent started with, the assembled system prompt in `system`.
    pub(super) settings: AgentConfig,
    /// The host's own system prompt, before the sections.
    pub(super) host_system: Option<Value>,
    /// The sections added after it, in [`PROMPT_SECTIONS`] order.
    pub(super) sections: Vec<PromptSection>,
    /// The tools registered at construction, in order.
    pub(super) tools: Vec<String>,
    /// Where the paths of write-kind tools resolve when the built-in tools have no workspace of their own.
    pub(super) workspace: Option<PathBuf>,
    /// The built-in tools' options (kept for child agents) and the background commands their bash started.
    pub(super) builtin: Option<(crate::builtin::BuiltinOptions, Arc<crate::builtin::BackgroundShells>)>,
    /// The skills found (`None`: no skill folders given).
    pub(super) skills: Option<crate::skills::SkillSet>,
    /// The instruction files loaded and skipped (`None`: none asked for).
    pub(super) instructions: Option<crate::instructions::Instructions>,
    /// The agent's name in its runs' spans (`gen_ai.agent.name`): a child agent's type.
    pub(super) trace_name: Option<String>,
    /// What a provider switched to is built from, and the fallback models (see `switch.rs`).
    pub(super) switching: switch::Switching,
    /// The session store attached at construction (its location).
    pub(super) store: Option<String>,
}

impl std::fmt::Debug for AgentSpec {
    // Not derived: `switching` holds the environment's keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSpec")
            .field("model", &self.settings.model)
            .field("sections", &self.sections)
            .field("tools", &self.tools)
            .field("workspace", &self.workspace)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl AgentSpec {
    /// A spec of these settings alone: no tools, no sections (what [`Agent::new`] builds).
    pub(super) fn plain(settings: AgentConfig) -> Self {
        AgentSpec {
            host_system: settings.system.clone(),
            settings,
            sections: Vec::new(),
            tools: Vec::new(),
            workspace: None,
            builtin: None,
            skills: None,
            instructions: None,
            trace_name: None,
            switching: switch::Switching::default(),
            store: None,
        }
    }

    /// The settings the agent was built with (the system prompt assembled); what it uses now is
    /// [`Agent::config`].
    pub fn settings(&self) -> &AgentConfig {
        &self.settings
    }

    /// The system prompt as assembled: the host's own, then [`AgentSpec::sections`] in order.
    pub fn system(&self) -> Option<&Value> {
        self.settings.system.as_ref()
    }

    /// The host's own system prompt, before the sections.
    pub fn host_system(&self) -> Option<&Value> {
        self.host_system.as_ref()
    }

    /// The sections the builder added to the system prompt, in [`PROMPT_SECTIONS`] order.
    pub fn sections(&self) -> &[PromptSection] {
        &self.sections
    }

    /// The names of the tools registered when the agent was built, in order.
    pub fn tool_names(&self) -> &[String] {
        &self.tools
    }

    /// The agent's workspace (see [`Agent::set_workspace`]).
    pub fn workspace(&self) -> Option<&std::path::Path> {
        self.workspace.as_deref()
    }

    /// The fallback models, in order.
    pub fn fallback_models(&self) -> &[ModelSpec] {
        self.switching.fallback()
    }

    /// The location of the session store attached when the agent was built.
    pub fn store(&self) -> Option<&str> {
        self.store.as_deref()
    }
}

/// The one way an agent is put together: [`AgentOptions::build`](crate::options::AgentOptions::build) builds
/// its agents with it, and a `task` call its child agents. Say what the agent is made of, then
/// [`AgentBuilder::build`]: the built-in tools come first (in their sandbox mode), then `tools`, the todo
/// tool, the skill tool, the `task` tool and the MCP servers' tools; the system prompt gets its sections
/// (see [`PROMPT_SECTIONS`]); the session is attached last.
pub(crate) struct AgentBuilder<'a> {
    provider: Arc<dyn Provider>,
    config: AgentConfig,
    /// The built-in coding tools, registered first.
    pub builtin: Option<crate::builtin::BuiltinOptions>,
    /// Further tools, registered after them in this order.
    pub tools: Vec<crate::tools::Tool>,
    /// The sandbox (mode, network) its `bash` runs in, when it has the built-in one: the model is told.
    pub sandbox: Option<(crate::builtin::SandboxMode, bool)>,
    /// A registry whose secrets the new agent's results must not show either (a child's parent).
    pub secrets: Option<&'a ToolRegistry>,
    /// Further values redacted from text read into the system prompt (the API key).
    pub prompt_secrets: Vec<String>,
    /// See [`Agent::set_workspace`].
    pub workspace: Option<PathBuf>,
    /// The options' provider config and the provider they named (`None`: a host model).
    pub provider_base: Option<(crate::provider::ProviderConfig, Option<crate::provider::Protocol>)>,
    /// The models to fall back to.
    pub fallback_models: Vec<ModelSpec>,
    /// Register the `todo_write` tool.
    pub planning: bool,
    /// Skill folders.
    pub skills: Vec<PathBuf>,
    /// Child agent types for the `task` tool.
    pub subagents: BTreeMap<String, crate::subagent::SubAgent>,
    /// MCP servers to start.
    pub mcp_servers: BTreeMap<String, crate::mcp::McpServerConfig>,
    /// Permission rules, relative path rules anchored at the path.
    pub rules: Option<(Arc<crate::rules::PermissionRules>, PathBuf)>,
    /// Instruction files as loaded (redacted and added to the prompt here).
    pub instructions: Option<crate::instructions::Instructions>,
    /// A session to open (location, workspace) and attach.
    pub session: Option<(PathBuf, Option<PathBuf>)>,
    /// The agent's name in its spans.
    pub trace_name: Option<String>,
    /// The permission callable.
    pub permission: Option<PermissionHook>,
    /// The hooks.
    pub hooks: crate::hooks::Hooks,
    /// The ledger its requests are held against (`None`: an account of its own).
    pub ledger: Option<Arc<crate::ledger::Ledger>>,
    /// Workspace paths its tools hold read-only (a parent's check files).
    pub run_protected: Vec<PathBuf>,
}

impl<'a> AgentBuilder<'a> {
    /// An agent of this provider and these settings, with nothing else yet.
    pub(crate) fn new(provider: Arc<dyn Provider>, config: AgentConfig) -> Self {
        AgentBuilder {
            provider,
            config,
            builtin: None,
            tools: Vec::new(),
            sandbox: None,
            secrets: None,
            prompt_secrets: Vec::new(),
            workspace: None,
            provider_base: None,
            fallback_models: Vec::new(),
            planning: false,
            skills: Vec::new(),
            subagents: BTreeMap::new(),
            mcp_servers: BTreeMap::new(),
            rules: None,
            instructions: None,
            session: None,
            trace_name: None,
            permission: None,
            hooks: crate::hooks::Hooks::default(),
            ledger: None,
            run_protected: Vec::new(),
        }
    }

    /// Put the agent together (see the type's docs). On an error nothing is left running: MCP servers
    /// already started stop when dropped.
    pub(crate) fn build(self) -> Result<Agent> {
        let tools = ToolRegistry::new();
        // The keys this agent sends never come back to the model through a tool result (`cat .env`).
        tools.add_secrets(self.provider.secrets().iter().map(|s| s.expose().to_string()));
        if let Some(from) = self.secrets {
            tools.share_secrets(from);
        }
        let builtin = match self.builtin {
            Some(options) => {
                let background = crate::builtin::register_owned(&tools, &options)?;
                Some((options, background))
            }
            None => None,
        };
        for t in self.tools {
            tools.register(t)?;
        }
        let mut sections = Vec::new();
        let mut section = |name: &'static str, text: String| {
            if !text.is_empty() {
                sections.push(PromptSection { name, text });
            }
        };
        // The built-in bash by name, not any shell-kind tool: the prompt describes the sandbox only it runs in.
        if let (Some((mode, network)), true) = (self.sandbox, tools.get("bash").is_some()) {
            // Short tool descriptions (a small window) go with the short sandbox note.
            let short = builtin.as_ref().is_some_and(|(b, _)| b.short_descriptions);
            let note = if short {
                crate::builtin::short_sandbox_prompt(mode, network)
            } else {
                crate::builtin::sandbox_prompt(mode, network)
            };
            section("sandbox", note);
        }
        if self.planning {
            tools.register(crate::todo::tool())?;
        }
        // Text read from files and servers into the system prompt is redacted like tool results: the
        // registry's secrets, every secret-looking environment value and the API key.
        let reads = !self.skills.is_empty() || !self.mcp_servers.is_empty() || self.instructions.is_some();
        let prompt_secrets = ToolRegistry::new();
        if reads {
            prompt_secrets.share_secrets(&tools);
            prompt_secrets.add_secrets(crate::builtin::secret_env_values(&[]));
            prompt_secrets.add_secrets(self.prompt_secrets);
        }
        let skills = if self.skills.is_empty() {
            None
        } else {
            let set = crate::skills::SkillSet::discover(&self.skills);
            if let Some(lines) = set.prompt().map(|l| prompt_secrets.redact(l)) {
                tools.register(set.tool())?;
                section("skills", lines);
            }
            Some(set)
        };
        if !self.subagents.is_empty() {
            tools.register(crate::subagent::tool(&self.subagents))?;
        }
        let mcp = if self.mcp_servers.is_empty() {
            None
        } else {
            // Secrets handed to a server (its env and headers) never come back through a result either.
            for c in self.mcp_servers.values() {
                let named = c.env.iter().chain(c.headers.iter());
                let secret = |k: &str| crate::builtin::is_secret_name(k) || k.eq_ignore_ascii_case("authorization");
                tools.add_secrets(named.filter(|(k, _)| secret(k)).map(|(_, v)| v.clone()));
            }
            let servers = crate::mcp::McpServers::start(&self.mcp_servers, &tools)?;
            prompt_secrets.share_secrets(&tools);
            section("mcp", prompt_secrets.redact(servers.instructions()));
            Some(servers)
        };
        let instructions = self.instructions.map(|mut found| {
            for f in &mut found.files {
                f.text = prompt_secrets.redact(std::mem::take(&mut f.text));
            }
            if let Some(text) = found.prompt() {
                section("instructions", text);
            }
            found
        });
        let store = match &self.session {
            Some((path, workspace)) => Some(crate::store::open(path, workspace.as_deref())?),
            None => None,
        };
        // The one place the system prompt is put together.
        let host_system = self.config.system.clone();
        let mut settings = self.config;
        settings.system = sections.iter().fold(host_system.clone(), |s, p| Some(crate::text::with_text(s, &p.text)));
        let mut switching = switch::Switching::default();
        if let Some((base, protocol)) = self.provider_base {
            switching.set_base(base, protocol);
        }
        switching.set_fallback(self.fallback_models);
        let spec = AgentSpec {
            settings,
            host_system,
            sections,
            tools: tools.names(),
            workspace: self.workspace,
            builtin,
            skills,
            instructions,
            trace_name: self.trace_name,
            switching,
            store: store.as_ref().map(|s| s.location()),
        };
        let control =
            Control { permission: self.permission, hooks: self.hooks, rules: self.rules, subagents: self.subagents };
        let spend =
            Spend { ledger: self.ledger.unwrap_or_else(|| crate::ledger::Ledger::new(None)), ..Spend::default() };
        tools.set_run_protected(self.run_protected);
        let agent = Agent::assemble(self.provider, tools, Arc::new(spec), control, spend, mcp);
        if let Some(store) = store {
            agent.attach_store(store)?;
        }
        Ok(agent)
    }
}
