//! The configured model as kin serves it: an [`OpenAiModel`] that is rebuilt from the whole
//! configuration (flags, environment, config file, key source) when ACP `authenticate` asks
//! for the credentials again, so a user who fixes the config file after starting kin gets the
//! model, endpoint, timeouts and retries written there, not only the key.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;

use super::key::load_hidden;
use super::{process_env, resolve, ConfigError, ModelConfig, Overrides};
use crate::model::{ChunkStream, Credentials, Model, ModelRequest, OpenAiModel};
use crate::process::child_env::ChildEnv;
use crate::sync::{read_lock, write_lock};

pub(crate) struct ReloadableModel {
    overrides: Overrides,
    /// Where every key it loads is hidden from the processes kin starts.
    env: ChildEnv,
    current: Arc<RwLock<Current>>,
}

/// The model in use.
struct Current {
    model: Arc<OpenAiModel>,
}

impl Current {
    fn new(model: OpenAiModel) -> Self {
        Self {
            model: Arc::new(model),
        }
    }
}

/// The model the configuration describes now (the key looked up too, not yet used).
async fn build(overrides: &Overrides, env: &ChildEnv) -> Result<OpenAiModel, ConfigError> {
    build_from(resolve(overrides, &process_env)?, env).await
}

/// The model `config` describes.
async fn build_from(config: ModelConfig, env: &ChildEnv) -> Result<OpenAiModel, ConfigError> {
    for key in &config.unknown_keys {
        tracing::warn!(key, "ignoring an unknown key in the config file");
    }
    let key = load_hidden(&config.key, env).await;
    Ok(OpenAiModel::new(config.settings(), key)?)
}

impl ReloadableModel {
    /// The model of `config`, resolved from `overrides` (command-line flags) over the
    /// environment and the config file, which a reload resolves again; a missing key is not an
    /// error here (the model asks for one when called).
    pub(crate) async fn new(
        overrides: &Overrides,
        config: ModelConfig,
        env: ChildEnv,
    ) -> Result<Self, ConfigError> {
        let model = build_from(config, &env).await?;
        Ok(Self {
            overrides: overrides.clone(),
            env,
            current: Arc::new(RwLock::new(Current::new(model))),
        })
    }

    fn read<T>(&self, f: impl FnOnce(&Current) -> T) -> T {
        f(&read_lock(&self.current))
    }

    fn model(&self) -> Arc<OpenAiModel> {
        self.read(|current| current.model.clone())
    }
}

impl Model for ReloadableModel {
    fn provider(&self) -> String {
        self.model().provider()
    }

    fn name(&self) -> String {
        self.model().name()
    }

    /// Calls already started keep the model they started with.
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        self.model().stream(request)
    }

    /// A snapshot of the current configuration under another model name.
    fn with_model_name(&self, name: &str) -> Option<Arc<dyn Model>> {
        self.model().with_model_name(name)
    }

    fn credentials(&self) -> Credentials {
        self.model().credentials()
    }

    fn prepare(&self) {
        self.model().prepare()
    }

    fn accepts_images(&self) -> bool {
        self.model().accepts_images()
    }

    fn discover_window(&self) -> BoxFuture<'static, Option<u64>> {
        self.model().discover_window()
    }

    /// Reads the whole configuration again and serves the model it describes from now on. A
    /// configuration that no longer resolves (say, the file is not valid TOML) leaves the
    /// model as it was and is reported as the reason there is no key.
    fn reload_credentials(&self) -> BoxFuture<'static, Credentials> {
        let overrides = self.overrides.clone();
        let env = self.env.clone();
        let current = self.current.clone();
        Box::pin(async move {
            match build(&overrides, &env).await {
                Ok(model) => {
                    let credentials = model.credentials();
                    tracing::info!(
                        model = %model.name(),
                        base_url = model.settings().base_url,
                        "read the model configuration again"
                    );
                    *write_lock(&current) = Current::new(model);
                    credentials
                }
                Err(error) => Credentials::Missing {
                    hint: error.to_string(),
                },
            }
        })
    }
}
