//! Changing an agent's model, and its provider with it: between runs by the host ([`Agent::set_model`]),
//! and within a run by a fallback ([`Agent::set_fallback_models`]) when the model is overloaded (529, 503),
//! rate-limited past its retries (429), down (other 5xx, or the connection fails, after the retries) or
//! refuses the context size. The conversation carries over either way: each request is rendered for the
//! provider and model it goes to (see [`crate::carry`]).
//!
//! A fallback sticks for the rest of the run — the tool loop under way goes on with the model that answered,
//! rather than changing hands (and dropping reasoning) again at every turn and paying the primary's retries
//! each time — and the next run starts on the primary again.
//!
//! Must never: fall back after any of a turn's output reached the host (that would show two answers), or
//! change the provider while a run is under way except by a fallback of that run.

use super::*;
use crate::provider::{Protocol, ProviderConfig, Secret};

/// A model to switch or fall back to: the model's name, on a provider (`None`: the agent's current one),
/// with what that provider needs. What is not given comes from the agent's own options when the provider
/// is the one the agent was built for, else from the environment as it was when the agent was built.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelSpec {
    /// The model name.
    pub model: String,
    /// The provider (`None`: the current one).
    pub provider: Option<Protocol>,
    /// Its API key.
    pub api_key: Option<Secret>,
    /// Its base URL.
    pub base_url: Option<String>,
    /// Bedrock: the AWS region.
    pub region: Option<String>,
    /// Extra headers on its requests (`None`: the agent's own, on the provider it was built for).
    pub headers: Option<Vec<(String, String)>>,
}

impl ModelSpec {
    /// `model` on the current provider.
    pub fn new(model: impl Into<String>) -> Self {
        ModelSpec { model: model.into(), ..Default::default() }
    }

    /// Whether it names anything beyond the model and the provider.
    fn has_settings(&self) -> bool {
        self.api_key.is_some() || self.base_url.is_some() || self.region.is_some() || self.headers.is_some()
    }
}

/// What a provider switched to is built from when the [`ModelSpec`] does not say.
#[derive(Debug, Clone)]
pub(super) struct Switching {
    /// The options' provider config (HTTP settings, and key, URL, region and headers for `protocol`).
    base: ProviderConfig,
    /// The protocol the options named (`None`: a host model).
    protocol: Option<Protocol>,
    /// The environment's keys, URLs and region at construction.
    env: Vec<(&'static str, String)>,
    /// The fallback models, in order.
    fallback: Vec<ModelSpec>,
}

/// The environment variables a provider switched to may take its key, URL or region from.
const ENV_NAMES: [&str; 6] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
];

impl Default for Switching {
    fn default() -> Self {
        let env = ENV_NAMES
            .iter()
            .filter_map(|&k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()).map(|v| (k, v)))
            .collect();
        Switching { base: ProviderConfig::new(Protocol::Anthropic), protocol: None, env, fallback: Vec::new() }
    }
}

impl Switching {
    /// Providers switched to take what `protocol` (`None`: a host model) needs from `base` when not told.
    pub(super) fn set_base(&mut self, base: ProviderConfig, protocol: Option<Protocol>) {
        self.base = base;
        self.protocol = protocol;
    }

    /// The models to fall back to, in order.
    pub(super) fn set_fallback(&mut self, models: Vec<ModelSpec>) {
        self.fallback = models;
    }

    /// The models to fall back to.
    pub(super) fn fallback(&self) -> &[ModelSpec] {
        &self.fallback
    }

    fn env(&self, name: &str) -> Option<String> {
        self.env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    }

    /// The config for `spec` on `protocol`.
    fn config(&self, protocol: Protocol, spec: &ModelSpec) -> ProviderConfig {
        let own = self.protocol == Some(protocol);
        let (key_var, url_var) = match protocol {
            Protocol::Anthropic => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
            Protocol::Bedrock => ("", ""),
            // Every OpenAI wire (Chat Completions and the ones after it) reads OpenAI's variables.
            #[allow(unreachable_patterns)]
            _ => ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
        };
        let mut c = ProviderConfig::new(protocol);
        c.http = self.base.http.clone();
        c.api_key = spec
            .api_key
            .clone()
            .or_else(|| own.then(|| self.base.api_key.clone()).flatten())
            .or_else(|| self.env(key_var).map(Secret::new));
        c.base_url = spec
            .base_url
            .clone()
            .or_else(|| own.then(|| self.base.base_url.clone()).flatten())
            .or_else(|| self.env(url_var));
        c.region = spec
            .region
            .clone()
            .or_else(|| self.base.region.clone())
            .or_else(|| self.env("AWS_REGION"))
            .or_else(|| self.env("AWS_DEFAULT_REGION"));
        c.headers = match &spec.headers {
            Some(h) => h.clone(),
            None if own => self.base.headers.clone(),
            None => Vec::new(),
        };
        c
    }
}

/// Why a turn's error lets the next fallback model answer it (`None`: it does not).
pub(super) fn fallback_reason(e: &Error) -> Option<&'static str> {
    use crate::error::ApiErrorKind;
    if crate::compaction::is_overflow(e) {
        return Some("context_overflow");
    }
    if let Error::Connection { .. } = e {
        return Some("unavailable");
    }
    // An `error` event inside a stream (Anthropic's mid-stream `overloaded_error`) counts like the status.
    let a = match e {
        Error::Api(_) | Error::StreamInterrupted { .. } => e.api()?,
        _ => return None,
    };
    match a.kind {
        ApiErrorKind::Overloaded => Some("overloaded"),
        ApiErrorKind::InternalServer if a.status == 503 => Some("overloaded"),
        ApiErrorKind::RateLimit => Some("rate_limit"),
        ApiErrorKind::InternalServer => Some("server_error"),
        _ => None,
    }
}

/// Whether none of the failed turn's content reached the host (a usage event may have): only then may
/// another model answer it.
pub(super) fn nothing_shown(e: &Error) -> bool {
    e.partial().is_none_or(|p| p.content.is_empty())
}

/// Where a run's fallbacks are: the next model to try, and what to go back to when the run ends.
#[derive(Default)]
pub(super) struct Fallbacks {
    next: usize,
    primary: Option<(Arc<dyn Provider>, String)>,
}

impl Agent {
    /// Remember what providers switched to are built from: the options' provider config (`protocol`: the
    /// provider the options named, `None` for a host model).
    #[deprecated(note = "the options' builder sets it; an agent's spec is not changed after it is built")]
    pub fn set_provider_base(&self, base: ProviderConfig, protocol: Option<Protocol>) {
        self.respec(|s| s.switching.set_base(base, protocol));
    }

    /// The models to fall back to within a run, in order (see the module docs of `switch.rs`, and
    /// [`Event::ModelFallback`]). Each is built when it is needed; one that cannot be (no key) is skipped.
    #[deprecated(
        note = "give them to the options (`fallback_models`); an agent's spec is not changed after it is built"
    )]
    pub fn set_fallback_models(&self, models: Vec<ModelSpec>) {
        self.respec(|s| s.switching.set_fallback(models));
    }

    /// The models to fall back to.
    pub fn fallback_models(&self) -> Vec<ModelSpec> {
        self.spec().switching.fallback.clone()
    }

    /// The model requests go to now.
    pub fn model(&self) -> String {
        lock(&self.config).model.clone()
    }

    /// Continue the conversation on another model, and provider (see [`ModelSpec`] for where its key and URL
    /// come from). The next request is rendered for it: what the new provider cannot take is left out by the
    /// rules of [`crate::carry`]; the store keeps everything. The switch is noted in the conversation (and its
    /// session). [`Error::Busy`] during a run; [`Error::Config`] when the provider cannot be built (no key),
    /// or the model has no price under a spend cap.
    pub fn set_model(&self, spec: ModelSpec) -> Result<()> {
        if spec.model.trim().is_empty() {
            return Err(Error::Config("set_model needs a model name".into()));
        }
        let _idle = self.begin(CancelToken::new())?;
        if lock(&self.config).max_cost_usd.is_some() && crate::models::price(&spec.model).is_none() {
            return Err(Error::Config(format!(
                "model {:?} has no known price, so the spend cap (max_cost_usd) cannot be kept",
                spec.model
            )));
        }
        let provider = self.provider_for(&spec)?;
        self.switch_to(provider, spec.model)
    }

    /// [`Agent::set_model`] onto a provider the host built (a host model function, a provider configured in
    /// a way [`ModelSpec`] cannot say).
    pub fn set_model_on(&self, provider: Arc<dyn Provider>, model: &str) -> Result<()> {
        if model.trim().is_empty() {
            return Err(Error::Config("set_model needs a model name".into()));
        }
        let _idle = self.begin(CancelToken::new())?;
        self.tools.add_secrets(provider.secrets().iter().map(|s| s.expose().to_string()));
        self.switch_to(provider, model.to_string())
    }

    /// Swap to `provider` and `model` between runs, noting the switch in the conversation.
    fn switch_to(&self, provider: Arc<dyn Provider>, model: String) -> Result<()> {
        let (from_provider, from_model) = (self.provider().name().to_string(), self.model());
        let to_provider = provider.name().to_string();
        self.swap(provider, model.clone());
        if !self.conversation.is_empty() {
            let note = format!("model switched: {from_model} ({from_provider}) -> {model} ({to_provider})");
            let mut entry = Entry::new(EntryRole::System, vec![ContentBlock::text(note)]);
            entry.meta.insert(
                "model_switch".into(),
                serde_json::json!({"from_provider": from_provider, "from_model": from_model,
                    "to_provider": to_provider, "to_model": model}),
            );
            self.record(entry)?;
        }
        Ok(())
    }

    /// The provider `spec` runs on: the current one when it names no other provider and no settings.
    pub(super) fn provider_for(&self, spec: &ModelSpec) -> Result<Arc<dyn Provider>> {
        let current = self.provider();
        let current_protocol = Protocol::parse(current.name()).ok();
        let protocol = match spec.provider.or(current_protocol) {
            Some(p) => p,
            // A host model, and settings that only a network provider takes.
            None if spec.has_settings() => {
                return Err(Error::Config(format!(
                    "the {} model takes no key or URL: name the provider to switch to",
                    current.name()
                )));
            }
            None => return Ok(current),
        };
        if Some(protocol) == current_protocol && !spec.has_settings() {
            return Ok(current);
        }
        let config = self.spec().switching.config(protocol, spec);
        let provider = config.build()?;
        // The new provider's keys never come back to the model through a tool result either.
        self.tools.add_secrets(provider.secrets().iter().map(|s| s.expose().to_string()));
        Ok(provider)
    }

    /// Requests go to `provider` and `model` from now on.
    pub(super) fn swap(&self, provider: Arc<dyn Provider>, model: String) {
        *self.provider.write().unwrap_or_else(|e| e.into_inner()) = provider;
        lock(&self.config).model = model;
        // The last answer's token count was another model's (another tokenizer): measure afresh.
        lock(&self.sizing).baseline = None;
    }

    /// After a turn failed with `err` before any of it reached the host: switch to the next fallback model
    /// that can be built (see [`fallback_reason`]). Returns whether it did; the turn is then sent again.
    pub(super) fn fall_back(
        &self,
        fallbacks: &mut Fallbacks,
        err: &Error,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<bool> {
        let Some(reason) = fallback_reason(err) else { return Ok(false) };
        let list = self.fallback_models();
        while let Some(spec) = list.get(fallbacks.next) {
            fallbacks.next += 1;
            let (from_provider, from_model) = (self.provider().name().to_string(), self.model());
            let provider = match self.provider_for(spec) {
                Ok(p) => p,
                Err(e) => {
                    let note = format!("fallback model {} skipped: {e}", spec.model);
                    self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
                    continue;
                }
            };
            if fallbacks.primary.is_none() {
                fallbacks.primary = Some((self.provider(), from_model.clone()));
            }
            let to_provider = provider.name().to_string();
            self.swap(provider, spec.model.clone());
            let error = err.to_string();
            let note = format!(
                "model fallback: {from_model} ({from_provider}) -> {} ({to_provider}): {reason}: {error}",
                spec.model
            );
            let mut entry = Entry::new(EntryRole::System, vec![ContentBlock::text(note)]);
            entry.meta.insert(
                "model_fallback".into(),
                serde_json::json!({"from_provider": from_provider, "from_model": from_model,
                    "to_provider": to_provider, "to_model": spec.model, "reason": reason, "error": error}),
            );
            self.record(entry)?;
            on_event(&Event::ModelFallback {
                from_provider,
                from_model,
                to_provider,
                to_model: spec.model.clone(),
                reason: reason.to_string(),
                error,
            });
            return Ok(true);
        }
        Ok(false)
    }

    /// A run has ended: the model it fell back from answers the next one.
    pub(super) fn end_fallbacks(&self, fallbacks: &mut Fallbacks) {
        if let Some((provider, model)) = fallbacks.primary.take() {
            self.swap(provider, model);
        }
        fallbacks.next = 0;
    }
}
