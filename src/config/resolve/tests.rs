//! Tests of the model configuration's resolution.

use super::*;
use crate::config::KeyStore;
use std::collections::HashMap;

struct Fixture {
    vars: HashMap<String, String>,
    _dir: tempfile::TempDir,
    file: PathBuf,
}

impl Fixture {
    fn new(file_text: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kin/config.toml");
        if let Some(text) = file_text {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, text).unwrap();
        }
        let mut vars = HashMap::new();
        vars.insert(
            "XDG_CONFIG_HOME".to_owned(),
            dir.path().to_string_lossy().into_owned(),
        );
        Self {
            vars,
            _dir: dir,
            file,
        }
    }

    fn set(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    fn resolve(&self, overrides: &Overrides) -> Result<ModelConfig, ConfigError> {
        let lookup = |name: &str| self.vars.get(name).cloned();
        resolve(overrides, &lookup)
    }
}

#[test]
fn defaults_are_deepseek() {
    let config = Fixture::new(None).resolve(&Overrides::default()).unwrap();
    assert_eq!(config.model.value, "deepseek-chat");
    assert_eq!(config.model.origin, Origin::Default);
    assert_eq!(config.base_url.value, "https://api.deepseek.com");
    assert!(!config.file_found);
    assert!(
        matches!(&config.key, KeyPlan::Missing { hint } if hint.contains("KIN_API_KEY") && hint.contains("DEEPSEEK_API_KEY")),
        "{:?}",
        config.key
    );
}

#[test]
fn flags_beat_environment_beats_file() {
    let fixture = Fixture::new(Some(
        "model = \"file-model\"\nbase_url = \"http://file.example/v1\"\nretries = 1\nstall_timeout = \"200ms\"\n",
    ))
    .set("KIN_MODEL", "env-model")
    .set("KIN_RETRIES", "5");
    let config = fixture.resolve(&Overrides::default()).unwrap();
    assert_eq!(config.model.value, "env-model");
    assert_eq!(config.model.origin, Origin::Env("KIN_MODEL".into()));
    assert_eq!(config.base_url.value, "http://file.example/v1");
    assert_eq!(config.base_url.origin, Origin::File(fixture.file.clone()));
    assert_eq!(config.retries.value, 5);
    assert_eq!(config.stall_timeout.value, Duration::from_millis(200));
    let flags = Overrides {
        model: Some("flag-model".into()),
        retries: Some(0),
        ..Overrides::default()
    };
    let config = fixture.resolve(&flags).unwrap();
    assert_eq!(config.model.value, "flag-model");
    assert_eq!(config.model.origin, Origin::Flag("--model"));
    assert_eq!(config.retries.value, 0);
}

#[test]
fn keys_come_from_kin_then_file_then_the_providers_variable() {
    let fixture = Fixture::new(Some("api_key = \"from-file\"\n"))
        .set("DEEPSEEK_API_KEY", "ds")
        .set("OPENAI_API_KEY", "oa");
    let config = fixture.resolve(&Overrides::default()).unwrap();
    assert!(matches!(&config.key, KeyPlan::Found(k) if k.source().starts_with("api_key in")));
    let fixture = fixture.set("KIN_API_KEY", "kin");
    let config = fixture.resolve(&Overrides::default()).unwrap();
    assert!(matches!(&config.key, KeyPlan::Found(k) if k.source() == "KIN_API_KEY"));

    // The DeepSeek key goes only to DeepSeek, the OpenAI key to everyone else.
    let fixture = Fixture::new(None)
        .set("DEEPSEEK_API_KEY", "ds")
        .set("OPENAI_API_KEY", "oa");
    let config = fixture.resolve(&Overrides::default()).unwrap();
    assert!(matches!(&config.key, KeyPlan::Found(k) if k.source() == "DEEPSEEK_API_KEY"));
    let local = Overrides {
        base_url: Some("http://127.0.0.1:8080/v1".into()),
        ..Overrides::default()
    };
    let config = fixture.resolve(&local).unwrap();
    assert!(matches!(&config.key, KeyPlan::Found(k) if k.source() == "OPENAI_API_KEY"));

    let named = Overrides {
        api_key_env: Some("MY_KEY".into()),
        ..Overrides::default()
    };
    let config = fixture.resolve(&named).unwrap();
    assert!(matches!(&config.key, KeyPlan::Missing { hint } if hint.contains("MY_KEY")));

    // The key `kin login` stored beats the provider's variable, not the file's own keys.
    let fixture = Fixture::new(Some("api_key_store = \"file\"\n")).set("OPENAI_API_KEY", "oa");
    let config = fixture.resolve(&local).unwrap();
    let expected = fixture.file.parent().unwrap().join("api-key");
    assert!(
        matches!(&config.key, KeyPlan::Stored { store: KeyStore::File, file: Some(f) } if *f == expected),
        "{:?}",
        config.key
    );
    let fixture = Fixture::new(Some("api_key = \"k\"\napi_key_store = \"keyring\"\n"));
    let config = fixture.resolve(&local).unwrap();
    assert!(matches!(&config.key, KeyPlan::Found(_)), "{:?}", config.key);
    let error = Fixture::new(Some("api_key_store = \"vault\"\n"))
        .resolve(&local)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("api_key_store") && error.contains("vault"),
        "{error}"
    );
}

#[test]
fn pass_env_comes_from_the_environment_or_the_file_and_key_vars_name_the_keys_sources() {
    let fixture = Fixture::new(Some(
        "pass_env = [\"GH_TOKEN\"]\napi_key_env = \"FILE_KEY\"\n",
    ))
    .set("DEEPSEEK_API_KEY", "ds");
    let named = Overrides {
        api_key_env: Some("FLAG_KEY".into()),
        ..Overrides::default()
    };
    let config = fixture.resolve(&named).unwrap();
    assert_eq!(config.pass_env.value, ["GH_TOKEN"]);
    assert_eq!(config.pass_env.origin, Origin::File(fixture.file.clone()));
    assert_eq!(config.key_vars, ["KIN_API_KEY", "FLAG_KEY", "FILE_KEY"]);
    let fixture = fixture.set("KIN_PASS_ENV", " A_TOKEN, B_SECRET  C ");
    let config = fixture.resolve(&Overrides::default()).unwrap();
    assert_eq!(config.pass_env.value, ["A_TOKEN", "B_SECRET", "C"]);
    assert_eq!(config.pass_env.origin, Origin::Env("KIN_PASS_ENV".into()));
    let config = Fixture::new(None)
        .set("DEEPSEEK_API_KEY", "ds")
        .resolve(&Overrides::default())
        .unwrap();
    assert_eq!(config.key_vars, ["KIN_API_KEY", "DEEPSEEK_API_KEY"]);
    assert!(config.pass_env.value.is_empty());
}

#[test]
fn bad_values_name_their_origin() {
    let fixture = Fixture::new(None).set("KIN_STALL_TIMEOUT", "soon");
    let error = fixture
        .resolve(&Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("KIN_STALL_TIMEOUT"), "{error}");
    let fixture = Fixture::new(None).set("KIN_BASE_URL", "api.deepseek.com");
    let error = fixture
        .resolve(&Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("KIN_BASE_URL") && error.contains("http"),
        "{error}"
    );
}

#[test]
fn model_tables_inherit_the_default_endpoint_and_key_unless_they_name_their_own() {
    let config = Fixture::new(Some(
        "context_window = 1000\ninput_price = 1\noutput_price = 2\n\
         [models.a]\nmodel = \"m-a\"\nimages = true\n\
         [models.b]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"OTHER_KEY\"\n",
    ))
    .set("KIN_API_KEY", "sk-default-key-0001")
    .set("OTHER_KEY", "sk-other-key-00002")
    .resolve(&Overrides::default())
    .unwrap();
    assert_eq!(config.profile.context_window, Some(1000));
    let prices = config.profile.prices.as_ref().unwrap();
    assert_eq!(
        (prices.input, prices.cached_input, prices.output),
        (1.0, 1.0, 2.0)
    );
    assert_eq!(prices.currency, "USD");
    let [a, b] = config.models.as_slice() else {
        panic!("{:?}", config.models)
    };
    assert_eq!(a.config.model.value, "m-a");
    assert!(a.profile.images && !b.profile.images);
    assert_eq!(a.config.base_url.value, config.base_url.value);
    assert_eq!(a.config.key, config.key);
    assert_eq!(
        b.config.model.value, "b",
        "the id is the model name by default"
    );
    assert_eq!(b.config.base_url.value, "http://127.0.0.1:9/v1");
    assert!(matches!(&b.config.key, KeyPlan::Found(key) if key.source() == "OTHER_KEY"));
}

#[test]
fn bad_model_tables_say_which_and_why() {
    let error = |file: &str| {
        Fixture::new(Some(file))
            .resolve(&Overrides::default())
            .unwrap_err()
            .to_string()
    };
    assert!(error("[models.default]\n").contains("taken by the default model"));
    assert!(error("[models.x]\ninput_price = 1\n").contains("both input_price and output_price"));
    assert!(error("[models.x]\nbogus = 1\n").contains("bogus"));
    assert!(error("compact_at = 1.5\n").contains("compact_at"));
}
