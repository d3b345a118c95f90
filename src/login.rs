//! `kin login` and `kin logout`: a sign-in at the terminal (what an editor runs for ACP's
//! terminal auth method) and its undoing.
//!
//! A sign-in picks the endpoint (a preset, any OpenAI-compatible URL, a local server that takes
//! no key), reads the key with the echo off, picks the model from the endpoint's list, and
//! proves key and model with one request; a refusal says what was wrong and asks again. Only
//! then is anything written: the key to the OS keyring or the credential file, then the config
//! file (its other keys and comments kept). Ctrl-C, a closed stdin or a broken terminal before
//! that leaves everything as it was. Flags answer every question for scripts.

mod endpoint;
mod terminal;

use std::path::PathBuf;

use crate::config::{self, ConfigError, CredentialError, KeyStore, Overrides, SignIn};
use crate::model::openai::KeyState;
use endpoint::{Preset, Refusal, PRESETS};
use terminal::{NoAnswer, Terminal};

/// Answers given on the command line; what is missing is asked at the terminal.
#[derive(Debug, Clone, Default)]
pub struct LoginOptions {
    /// A preset endpoint by id (`deepseek`, `openai`, `llama-cpp`, `ollama`).
    pub provider: Option<String>,
    /// Any OpenAI-compatible API root.
    pub base_url: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// Read the key from stdin's first line.
    pub api_key_stdin: bool,
    /// The endpoint takes no key.
    pub no_key: bool,
    /// Where the key goes (default: the keyring, else the file).
    pub key_store: Option<KeyStore>,
    /// Skip the check request.
    pub no_check: bool,
}

/// Why a sign-in did not complete.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// `--provider` names no preset.
    #[error("unknown provider {0:?}; expected one of deepseek, openai, llama-cpp, ollama")]
    UnknownProvider(String),
    /// An answer is missing and there is no terminal to ask it at.
    #[error("stdin is not a terminal, so kin login cannot ask for {0}; give it as a flag (see `kin login --help`)")]
    NeedsTerminal(&'static str),
    /// A value given on the command line is not usable.
    #[error("{0}")]
    Invalid(String),
    /// No answer came (stdin closed, terminal broken).
    #[error(transparent)]
    NoAnswer(#[from] NoAnswer),
    /// The endpoint refused, and there was no one to ask what to change.
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// The user chose to stop.
    #[error("stopped; nothing was changed")]
    Quit,
    /// The config file could not be read or written.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The key could not be stored or removed.
    #[error("storing the key: {0}")]
    Credentials(#[from] CredentialError),
    /// Neither `XDG_CONFIG_HOME` nor `HOME` is set.
    #[error("no config directory (neither XDG_CONFIG_HOME nor HOME is set)")]
    NoConfigDir,
}

/// Where kin would look for its model.
#[derive(Debug, Clone, PartialEq)]
struct Endpoint {
    base_url: String,
    name: String,
    /// `Some(false)` for a local server that takes no key; `None` when unknown.
    needs_key: Option<bool>,
    default_model: Option<String>,
}

impl Endpoint {
    fn of(preset: Preset) -> Self {
        Self {
            base_url: preset.base_url.to_owned(),
            name: preset.name.to_owned(),
            needs_key: Some(preset.needs_key),
            default_model: preset.default_model.map(str::to_owned),
        }
    }

    fn at(base_url: &str) -> Self {
        endpoint::preset_at(base_url).map_or_else(
            || Self {
                base_url: base_url.trim_end_matches('/').to_owned(),
                name: base_url.to_owned(),
                needs_key: None,
                default_model: None,
            },
            Self::of,
        )
    }
}

/// The configuration before the sign-in, for defaults.
#[derive(Debug, Default)]
struct Current {
    base_url: Option<String>,
    model: Option<String>,
    key: Option<(String, String)>,
}

/// What the sign-in settled on, before anything is written.
#[derive(Debug)]
struct Decided {
    endpoint: Endpoint,
    model: String,
    key: Option<String>,
}

/// Which question to ask next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Endpoint,
    Key,
    Model,
    Check,
}

/// Runs `kin login`; the exit code is 0 when signed in, 130 when cancelled with Ctrl-C.
pub async fn login(options: LoginOptions) -> Result<u8, LoginError> {
    // A config file that is not TOML could not be edited: say so before the questions.
    if let Err(error @ ConfigError::Parse { .. }) = config::ConfigFile::read(&config::process_env) {
        return Err(error.into());
    }
    let term = Terminal::open();
    let current = current().await;
    let decided = tokio::select! {
        decided = decide(&term, &options, &current) => decided?,
        _ = tokio::signal::ctrl_c() => {
            drop(term);
            eprintln!("\nkin login: cancelled; nothing was changed");
            return Ok(130);
        }
    };
    save(
        &term,
        &decided,
        options.key_store.unwrap_or(KeyStore::Keyring),
    )
    .await?;
    Ok(0)
}

/// The configured endpoint, model and key, where they resolve.
async fn current() -> Current {
    let Ok(config) = config::resolve(&Overrides::default(), &config::process_env) else {
        return Current::default();
    };
    let key = match config::load_key(&config.key).await {
        KeyState::Present(key) if !key.secret().is_empty() => {
            Some((key.secret().to_owned(), key.masked()))
        }
        _ => None,
    };
    Current {
        base_url: Some(config.base_url.value),
        model: Some(config.model.value),
        key,
    }
}

async fn decide(
    term: &Terminal,
    options: &LoginOptions,
    current: &Current,
) -> Result<Decided, LoginError> {
    let mut endpoint = match (&options.provider, &options.base_url) {
        (Some(id), _) => Endpoint::of(
            endpoint::preset(id).ok_or_else(|| LoginError::UnknownProvider(id.clone()))?,
        ),
        (None, Some(url)) => {
            check_url(url).map_err(LoginError::Invalid)?;
            Endpoint::at(url)
        }
        (None, None) if term.interactive() => choose_endpoint(term, current).await?,
        (None, None) => {
            return Err(LoginError::NeedsTerminal(
                "the endpoint (--provider or --base-url)",
            ))
        }
    };
    let mut given_model = options.model.clone();
    let mut key = None;
    let mut model = String::new();
    let mut step = Step::Key;
    loop {
        step = match step {
            Step::Endpoint => {
                endpoint = choose_endpoint(term, current).await?;
                Step::Key
            }
            Step::Key => {
                key = ask_key(term, options, &endpoint, current).await?;
                Step::Model
            }
            // A model given as a flag needs no list (the check tries it).
            Step::Model if given_model.is_some() => {
                model = given_model.take().unwrap_or_default();
                Step::Check
            }
            Step::Model => match endpoint::models(&endpoint.base_url, key.as_deref()).await {
                Ok(listed) => {
                    model = choose_model(term, &endpoint, listed, current).await?;
                    Step::Check
                }
                Err(refusal) => after_refusal(term, refusal, Step::Model, &mut endpoint).await?,
            },
            Step::Check if options.no_check => break,
            Step::Check => {
                term.say(&format!("Checking {model} at {} ...\n", endpoint.base_url));
                match endpoint::check(&endpoint.base_url, key.as_deref(), &model).await {
                    Ok(()) => break,
                    Err(refusal) => {
                        after_refusal(term, refusal, Step::Check, &mut endpoint).await?
                    }
                }
            }
        };
    }
    Ok(Decided {
        endpoint,
        model,
        key,
    })
}

/// [`recover`], and when the user asks to change the key of an endpoint thought to take none,
/// the key question is asked after all (the refusal says it wants one).
async fn after_refusal(
    term: &Terminal,
    refusal: Refusal,
    failed: Step,
    endpoint: &mut Endpoint,
) -> Result<Step, LoginError> {
    let next = recover(term, refusal, failed).await?;
    if next == Step::Key && endpoint.needs_key == Some(false) {
        endpoint.needs_key = None;
    }
    Ok(next)
}

/// After a refusal at step `failed`: says what went wrong and asks what to change (the likely
/// answer first; retrying runs `failed` again). Without a terminal, the refusal is the error.
async fn recover(term: &Terminal, refusal: Refusal, failed: Step) -> Result<Step, LoginError> {
    if !term.interactive() {
        return Err(refusal.into());
    }
    let likely = match &refusal {
        Refusal::Endpoint(_) => 'e',
        Refusal::Key(_) => 'k',
        Refusal::Model(_) => 'm',
        Refusal::Other(_) => 'r',
    };
    term.say(&format!("\nThat did not work: {refusal}\n"));
    loop {
        let answer = term
            .ask(&format!(
                "Change the [e]ndpoint, the [k]ey or the [m]odel, [r]etry, or [q]uit? [{likely}] "
            ))
            .await?;
        let choice = answer.chars().next().unwrap_or(likely).to_ascii_lowercase();
        match choice {
            'e' => return Ok(Step::Endpoint),
            'k' => return Ok(Step::Key),
            'm' => return Ok(Step::Model),
            'r' => return Ok(failed),
            'q' => return Err(LoginError::Quit),
            _ => term.say("Please answer e, k, m, r or q.\n"),
        }
    }
}

async fn choose_endpoint(term: &Terminal, current: &Current) -> Result<Endpoint, LoginError> {
    let custom = PRESETS.len() + 1;
    let default = match current.base_url.as_deref() {
        None => 1,
        Some(url) => PRESETS
            .iter()
            .position(|preset| Some(*preset) == endpoint::preset_at(url))
            .map_or(custom, |at| at + 1),
    };
    let mut menu = String::from("Where does kin find its model?\n");
    for (n, preset) in PRESETS.iter().enumerate() {
        let key = if preset.needs_key { "" } else { ", no key" };
        menu.push_str(&format!(
            "  {}) {} ({}{key})\n",
            n + 1,
            preset.name,
            preset.base_url
        ));
    }
    menu.push_str(&format!("  {custom}) Another OpenAI-compatible endpoint\n"));
    term.say(&menu);
    loop {
        let answer = term.ask(&format!("Endpoint [{default}]: ")).await?;
        let choice = if answer.is_empty() {
            Ok(default)
        } else {
            answer.parse::<usize>()
        };
        match choice {
            Ok(n) if (1..=PRESETS.len()).contains(&n) => return Ok(Endpoint::of(PRESETS[n - 1])),
            Ok(n) if n == custom => return ask_url(term, current).await,
            _ => term.say(&format!("Please answer a number from 1 to {custom}.\n")),
        }
    }
}

async fn ask_url(term: &Terminal, current: &Current) -> Result<Endpoint, LoginError> {
    let suggested = current
        .base_url
        .as_deref()
        .filter(|url| endpoint::preset_at(url).is_none());
    loop {
        let question = match suggested {
            Some(url) => format!("API root, e.g. http://host:8000/v1 [{url}]: "),
            None => "API root, e.g. http://host:8000/v1: ".to_owned(),
        };
        let answer = term.ask(&question).await?;
        let url = match (answer.is_empty(), suggested) {
            (true, Some(url)) => url.to_owned(),
            _ => answer,
        };
        match check_url(&url) {
            // Typed as "another endpoint": whether it takes a key is asked, even where its
            // address is a preset's (a vLLM on llama.cpp's port may want one).
            Ok(()) => {
                return Ok(Endpoint {
                    needs_key: None,
                    ..Endpoint::at(&url)
                })
            }
            Err(why) => term.say(&format!("{why}\n")),
        }
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    if scheme_ok && crate::model::openai::host(url).is_some() {
        return Ok(());
    }
    Err(format!("{url:?} is not an http:// or https:// URL"))
}

async fn ask_key(
    term: &Terminal,
    options: &LoginOptions,
    endpoint: &Endpoint,
    current: &Current,
) -> Result<Option<String>, LoginError> {
    if options.no_key {
        return Ok(None);
    }
    // A key given on stdin is used even for an endpoint that usually takes none.
    if options.api_key_stdin {
        let key = term
            .ask_hidden(if term.interactive() { "API key: " } else { "" })
            .await?;
        return Ok((!key.is_empty()).then_some(key));
    }
    if endpoint.needs_key == Some(false) {
        return Ok(None);
    }
    if !term.interactive() {
        return Err(LoginError::NeedsTerminal(
            "the key (--api-key-stdin or --no-key)",
        ));
    }
    // The key in use now stays on Enter, for the endpoint it belongs to.
    let keep = current
        .key
        .as_ref()
        .filter(|_| current.base_url.as_deref() == Some(endpoint.base_url.as_str()));
    loop {
        let question = match (keep, endpoint.needs_key) {
            (Some((_, masked)), _) => {
                format!(
                    "API key for {} (hidden; Enter keeps {masked}): ",
                    endpoint.name
                )
            }
            (None, None) => "API key (hidden; Enter if the server takes none): ".to_owned(),
            (None, _) => format!("API key for {} (hidden): ", endpoint.name),
        };
        let key = term.ask_hidden(&question).await?;
        match (key.is_empty(), keep, endpoint.needs_key) {
            (false, _, _) => return Ok(Some(key)),
            (true, Some((key, _)), _) => return Ok(Some(key.clone())),
            (true, None, None) => return Ok(None),
            (true, None, _) => {
                term.say("The endpoint needs a key; paste it, or press Ctrl-C to stop.\n")
            }
        }
    }
}

async fn choose_model(
    term: &Terminal,
    endpoint: &Endpoint,
    listed: Option<Vec<String>>,
    current: &Current,
) -> Result<String, LoginError> {
    let same_endpoint = current.base_url.as_deref() == Some(endpoint.base_url.as_str());
    let preferred = [
        current.model.clone().filter(|_| same_endpoint),
        endpoint.default_model.clone(),
    ];
    let Some(models) = listed else {
        if !term.interactive() {
            return Err(LoginError::NeedsTerminal(
                "the model (--model); the endpoint lists none",
            ));
        }
        let fallback = preferred.into_iter().flatten().next();
        loop {
            let question = match &fallback {
                Some(model) => format!("The endpoint lists no models. Model name [{model}]: "),
                None => "The endpoint lists no models. Model name: ".to_owned(),
            };
            let answer = term.ask(&question).await?;
            match (answer.is_empty(), &fallback) {
                (false, _) => return Ok(answer),
                (true, Some(model)) => return Ok(model.clone()),
                (true, None) => {}
            }
        }
    };
    let default = preferred
        .iter()
        .flatten()
        .find_map(|wanted| models.iter().position(|m| m == wanted))
        .unwrap_or(0);
    if !term.interactive() {
        if models.len() == 1 || preferred.iter().flatten().any(|m| models.contains(m)) {
            return Ok(models[default].clone());
        }
        return Err(LoginError::NeedsTerminal("the model (--model)"));
    }
    let mut menu = match models.len() {
        1 => format!("{} lists 1 model:\n", endpoint.base_url),
        n => format!("{} lists {n} models:\n", endpoint.base_url),
    };
    for (n, model) in models.iter().enumerate() {
        menu.push_str(&format!("  {}) {model}\n", n + 1));
    }
    term.say(&menu);
    loop {
        let answer = term
            .ask(&format!("Model (number or name) [{}]: ", default + 1))
            .await?;
        if answer.is_empty() {
            return Ok(models[default].clone());
        }
        match answer.parse::<usize>() {
            Ok(n) if (1..=models.len()).contains(&n) => return Ok(models[n - 1].clone()),
            Ok(_) => term.say(&format!(
                "Please answer a number from 1 to {}.\n",
                models.len()
            )),
            // A name: some endpoints take names they do not list (aliases).
            Err(_) => return Ok(answer),
        }
    }
}

/// Stores the key, then writes the config file, and says what was done.
async fn save(term: &Terminal, decided: &Decided, wanted: KeyStore) -> Result<(), LoginError> {
    let env = &config::process_env;
    let path: PathBuf = config::config_file(env).ok_or(LoginError::NoConfigDir)?;
    let key = decided.key.clone();
    let (store, fallback) = tokio::task::spawn_blocking(move || match key {
        Some(key) => config::save_key(wanted, &key, &config::process_env),
        // No key: one stored for an earlier endpoint would only mislead.
        None => config::remove_key(&config::process_env).map(|_| (KeyStore::None, None)),
    })
    .await
    .map_err(|error| CredentialError::Keyring(error.to_string()))??;
    let sign_in = SignIn {
        base_url: decided.endpoint.base_url.clone(),
        model: decided.model.clone(),
        store,
    };
    let removed = config::write_sign_in(&path, &sign_in)?;
    let mut report = format!(
        "Signed in: kin uses {} at {}.\n",
        decided.model, decided.endpoint.base_url
    );
    if let Some(why) = fallback {
        report.push_str(&format!("No OS keyring could take the key ({why}).\n"));
    }
    match store {
        KeyStore::Keyring => report.push_str("The key is in the OS keyring.\n"),
        KeyStore::File => {
            let file = config::credential_file(env).unwrap_or_default();
            report.push_str(&format!(
                "The key is in {} (readable by you only).\n",
                file.display()
            ));
        }
        KeyStore::None => report.push_str("The endpoint takes no key.\n"),
    }
    if !removed.is_empty() {
        report.push_str(&format!(
            "Removed {} from the config file: the stored key replaces it.\n",
            removed.join(", ")
        ));
    }
    report.push_str(&format!("Config: {}\n", path.display()));
    term.say(&report);
    Ok(())
}

/// Runs `kin logout`: removes the stored key and the config file's pointer to it.
pub async fn logout() -> Result<u8, LoginError> {
    let removed = tokio::task::spawn_blocking(|| config::remove_key(&config::process_env))
        .await
        .map_err(|error| CredentialError::Keyring(error.to_string()))??;
    let path = config::config_file(&config::process_env).ok_or(LoginError::NoConfigDir)?;
    let forgot = config::forget_sign_in(&path)?;
    if removed.is_empty() && !forgot {
        eprintln!("kin logout: kin login had stored no key");
    }
    for place in &removed {
        eprintln!("Removed the key from {place}.");
    }
    if forgot {
        eprintln!("{} no longer names a stored key.", path.display());
    }
    if let Ok(config) = config::resolve(&Overrides::default(), &config::process_env) {
        if let KeyState::Present(key) = config::load_key(&config.key).await {
            eprintln!("kin still finds a key in {}.", key.source());
        }
    }
    Ok(0)
}
