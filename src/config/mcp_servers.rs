//! MCP servers for every session: the `[mcp_servers.<name>]` tables of the config file
//! (`command`, `args`, `env` for stdio; `url`, `headers`, OAuth's `client_id`, `client_secret`
//! or `client_secret_env` or `private_key_file`, `client_metadata_url`, `grant` and its
//! settings, and `scopes` for streamable HTTP; `call_timeout`), `mcp_startup_timeout` and
//! `mcp_max_tools`. An editor's server of the same name replaces a configured one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::duration::{duration_value, DurationValue};
use super::ConfigError;
use crate::mcp::{ClientSecret, EnterpriseIdp, Grant, OAuthSettings, ServerSpec, Transport};

/// One `[mcp_servers.<name>]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpServerEntry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// How long one tool call may take, e.g. "30m".
    call_timeout: Option<DurationValue>,
    /// An HTTP server's OAuth client id, registered beforehand (else kin registers itself).
    client_id: Option<String>,
    /// The secret of that pre-registered client (prefer `client_secret_env`).
    client_secret: Option<String>,
    /// The variable holding that secret.
    client_secret_env: Option<String>,
    /// Instead of a secret, the client's P-256 key (a PKCS#8 PEM file; relative to the config
    /// file's directory): kin signs its token requests with it (`private_key_jwt`).
    private_key_file: Option<String>,
    /// The HTTPS URL of kin's client metadata document (a URL client id, where taken).
    client_metadata_url: Option<String>,
    /// How kin gets tokens: "authorization_code" (a user's login, the default),
    /// "client_credentials" (the configured client itself) or "enterprise" (the user's
    /// enterprise identity, with the `idp_*` settings and `id_token_command`).
    grant: Option<String>,
    /// The enterprise IdP's issuer, token endpoint and kin's client there (`grant = "enterprise"`).
    idp_issuer: Option<String>,
    idp_token_endpoint: Option<String>,
    idp_client_id: Option<String>,
    /// A command printing the user's ID token from that IdP.
    id_token_command: Option<String>,
    /// The OAuth scopes kin asks an HTTP server for (else the ones it advertises).
    #[serde(default)]
    scopes: Vec<String>,
    /// Run the (stdio) server inside kin's sandbox, like a command.
    #[serde(default)]
    sandbox: bool,
}

/// The configured servers, in name order, and the startup timeout.
#[derive(Debug, Clone, Default)]
pub struct McpSettings {
    /// The configured servers, by name.
    pub servers: Vec<ServerSpec>,
    /// How long a server may take to start; the built-in default when `None`.
    pub startup_timeout: Option<Duration>,
    /// The most MCP tools offered to the model; the built-in default when `None`.
    pub max_tools: Option<usize>,
    /// The stdio servers that opted into kin's sandbox (`sandbox = true`), by name.
    pub sandboxed: Vec<String>,
}

impl McpSettings {
    /// The client secrets written in the config file: kept from tool processes, as the model
    /// key is.
    pub fn client_secrets(&self) -> impl Iterator<Item = &str> {
        self.logins()
            .filter_map(|login| match &login.client_secret {
                Some(ClientSecret::Value(secret)) => Some(secret.as_str()),
                _ => None,
            })
    }

    /// The clients' signing key files: kin's own, refused to its tools like the config file.
    pub fn key_files(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.logins()
            .filter_map(|login| login.private_key_file.clone())
    }

    /// The OAuth settings of the servers kin logs in to.
    fn logins(&self) -> impl Iterator<Item = &OAuthSettings> {
        self.servers
            .iter()
            .filter_map(|server| match &server.transport {
                Transport::Http {
                    login: Some(settings),
                    ..
                } => Some(settings),
                _ => None,
            })
    }
}

pub(crate) fn resolve(
    entries: &BTreeMap<String, McpServerEntry>,
    timeout: Option<&DurationValue>,
    path: &Path,
) -> Result<McpSettings, ConfigError> {
    let invalid = |key: String, reason: &str| ConfigError::Invalid {
        origin: format!("{key} in config file {}", path.display()),
        reason: reason.to_owned(),
    };
    let startup_timeout = timeout
        .map(|value| duration_value(value).map_err(|e| invalid("mcp_startup_timeout".into(), &e)))
        .transpose()?;
    let servers = entries
        .iter()
        .map(|(name, entry)| {
            let key = |field: &str| format!("mcp_servers.{name}.{field}");
            let pairs = |map: &BTreeMap<String, String>| {
                map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
            };
            let transport = match (&entry.command, &entry.url) {
                (Some(command), None) if !command.trim().is_empty() => Transport::Stdio {
                    command: command.clone(),
                    args: entry.args.clone(),
                    env: pairs(&entry.env),
                },
                (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                    Transport::Http {
                        url: url.clone(),
                        headers: pairs(&entry.headers),
                        login: Some(OAuthSettings {
                            client_id: entry.client_id.clone(),
                            scopes: entry.scopes.clone(),
                            client_secret: client_secret(entry)
                                .map_err(|(field, why)| invalid(key(field), why))?,
                            private_key_file: private_key_file(entry, path)
                                .map_err(|why| invalid(key("private_key_file"), why))?,
                            client_metadata_url: client_metadata_url(entry)
                                .map_err(|why| invalid(key("client_metadata_url"), why))?,
                            grant: grant(entry).map_err(|why| invalid(key("grant"), why))?,
                        }),
                    }
                }
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        key("url"),
                        "give either `command` or `url`, not both",
                    ))
                }
                (Some(_), None) => return Err(invalid(key("command"), "must not be empty")),
                (None, Some(_)) => {
                    return Err(invalid(key("url"), "must be an http:// or https:// URL"))
                }
                (None, None) => {
                    return Err(invalid(key("command"), "a server needs `command` or `url`"))
                }
            };
            let call_timeout = entry
                .call_timeout
                .as_ref()
                .map(|value| duration_value(value).map_err(|e| invalid(key("call_timeout"), &e)))
                .transpose()?;
            Ok(ServerSpec {
                name: name.clone(),
                transport,
                call_timeout,
            })
        })
        .collect::<Result<_, _>>()?;
    let sandboxed = entries
        .iter()
        .filter(|(_, entry)| entry.sandbox)
        .map(|(name, entry)| match entry.command {
            Some(_) => Ok(name.clone()),
            None => Err(invalid(
                format!("mcp_servers.{name}.sandbox"),
                "only a stdio server (`command`) runs in kin's sandbox",
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(McpSettings {
        servers,
        startup_timeout,
        max_tools: None,
        sandboxed,
    })
}

/// The pre-registered client's secret of `entry`, the variable read now; or which field is
/// wrong and why.
fn client_secret(
    entry: &McpServerEntry,
) -> Result<Option<ClientSecret>, (&'static str, &'static str)> {
    let secret = match (&entry.client_secret, &entry.client_secret_env) {
        (Some(_), Some(_)) => {
            return Err((
                "client_secret",
                "give either `client_secret` or `client_secret_env`, not both",
            ))
        }
        (Some(secret), None) => ClientSecret::Value(secret.clone()),
        (None, Some(name)) => match std::env::var(name) {
            Ok(secret) if !secret.trim().is_empty() => ClientSecret::Value(secret),
            _ => ClientSecret::Unset(name.clone()),
        },
        (None, None) => return Ok(None),
    };
    match entry.client_id {
        Some(_) => Ok(Some(secret)),
        None => Err((
            "client_secret",
            "a client secret belongs to a pre-registered `client_id`; set that too",
        )),
    }
}

/// The client's signing key file of `entry`, relative to the config file `path`'s directory.
fn private_key_file(entry: &McpServerEntry, path: &Path) -> Result<Option<PathBuf>, &'static str> {
    let Some(file) = &entry.private_key_file else {
        return Ok(None);
    };
    if entry.client_secret.is_some() || entry.client_secret_env.is_some() {
        return Err("give either a client secret or `private_key_file`, not both");
    }
    if entry.client_id.is_none() || entry.grant.as_deref() != Some("client_credentials") {
        return Err("signs token requests of `grant = \"client_credentials\"` with `client_id`");
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    Ok(Some(dir.join(file)))
}

/// How `entry` gets its tokens (`grant`, with what each needs).
fn grant(entry: &McpServerEntry) -> Result<Grant, &'static str> {
    let confidential = entry.client_id.is_some()
        && (entry.client_secret.is_some() || entry.client_secret_env.is_some());
    let signs = entry.client_id.is_some() && entry.private_key_file.is_some();
    match entry.grant.as_deref() {
        None | Some("authorization_code") => Ok(Grant::AuthorizationCode),
        Some("client_credentials") if confidential || signs => Ok(Grant::ClientCredentials),
        Some("client_credentials") => Err("\"client_credentials\" needs `client_id` and \
             `client_secret_env` (or `client_secret`, or `private_key_file`)"),
        Some("enterprise") => match (
            confidential,
            &entry.idp_issuer,
            &entry.idp_token_endpoint,
            &entry.idp_client_id,
            &entry.id_token_command,
        ) {
            (true, Some(issuer), Some(token_endpoint), Some(client_id), Some(command)) => {
                Ok(Grant::Enterprise(Box::new(EnterpriseIdp {
                    issuer: issuer.clone(),
                    token_endpoint: token_endpoint.clone(),
                    client_id: client_id.clone(),
                    id_token_command: command.clone(),
                })))
            }
            _ => Err("\"enterprise\" needs `client_id`, its secret, `idp_issuer`, \
                      `idp_token_endpoint`, `idp_client_id` and `id_token_command`"),
        },
        Some(_) => Err(
            "must be \"authorization_code\" (the default), \"client_credentials\" or \"enterprise\"",
        ),
    }
}

/// `client_metadata_url` of `entry`: an https URL with a path, as a client id must be.
fn client_metadata_url(entry: &McpServerEntry) -> Result<Option<String>, &'static str> {
    let Some(url) = &entry.client_metadata_url else {
        return Ok(None);
    };
    match reqwest::Url::parse(url) {
        Ok(parsed) if parsed.scheme() == "https" && parsed.path() != "/" => Ok(Some(url.clone())),
        _ => Err(
            "must be an https:// URL with a path (the address of kin's client metadata document)",
        ),
    }
}

/// `kin config`'s lines for the servers (values of env and headers masked).
pub fn render(settings: &McpSettings) -> String {
    let mut text = String::new();
    for spec in &settings.servers {
        let sandboxed = match settings.sandboxed.contains(&spec.name) {
            true => " (in kin's sandbox)",
            false => "",
        };
        text.push_str(&format!(
            "mcp server {}: {}{sandboxed}\n",
            spec.name,
            spec.transport.describe()
        ));
    }
    if let Some(timeout) = settings.startup_timeout {
        text.push_str(&format!(
            "mcp_startup_timeout: {} s\n",
            timeout.as_secs_f64()
        ));
    }
    if let Some(max) = settings.max_tools {
        text.push_str(&format!("mcp_max_tools: {max}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpSettings, ConfigError> {
        let file: super::super::file::FileConfig = toml::from_str(text).unwrap();
        resolve(
            &file.mcp_servers,
            file.mcp_startup_timeout.as_ref(),
            Path::new("/c/config.toml"),
        )
    }

    #[test]
    fn reads_stdio_and_http_servers_and_masks_them() {
        let settings = parse(
            "mcp_startup_timeout = \"2s\"\n[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\nenv = { API_TOKEN = \"t0p\" }\n[mcp_servers.web]\nurl = \"https://h/mcp\"\nheaders = { Authorization = \"Bearer s3cret\" }\n",
        )
        .unwrap();
        assert_eq!(settings.startup_timeout, Some(Duration::from_secs(2)));
        let shown = render(&settings);
        assert_eq!(
            shown,
            "mcp server files: stdio: npx -y x (env: API_TOKEN=***)\n\
             mcp server web: http: https://h/mcp (headers: Authorization=***)\n\
             mcp_startup_timeout: 2 s\n"
        );
    }

    #[test]
    fn stdio_servers_opt_into_the_sandbox() {
        let settings = parse("[mcp_servers.a]\ncommand = \"x\"\nsandbox = true\n").unwrap();
        assert_eq!(settings.sandboxed, ["a"]);
        assert_eq!(
            render(&settings),
            "mcp server a: stdio: x (in kin's sandbox)\n"
        );
        let error = parse("[mcp_servers.a]\nurl = \"https://h\"\nsandbox = true\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("mcp_servers.a.sandbox"), "{error}");
    }

    fn login_of(settings: &McpSettings) -> OAuthSettings {
        match &settings.servers[0].transport {
            Transport::Http {
                login: Some(login), ..
            } => login.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_a_pre_registered_client_and_a_metadata_document() {
        let settings = parse(
            "[mcp_servers.a]\nurl = \"https://h/mcp\"\nclient_id = \"c\"\nclient_secret = \"s3\"\n\
             client_metadata_url = \"https://kin.example/client.json\"\n",
        )
        .unwrap();
        let login = login_of(&settings);
        assert_eq!(login.client_secret, Some(ClientSecret::Value("s3".into())));
        assert!(!format!("{login:?}").contains("s3"));
        assert_eq!(
            login.client_metadata_url.as_deref(),
            Some("https://kin.example/client.json")
        );
        let unset = "KIN_TEST_SURELY_UNSET_SECRET";
        let settings = parse(&format!(
            "[mcp_servers.a]\nurl = \"https://h/mcp\"\nclient_id = \"c\"\nclient_secret_env = \"{unset}\"\n"
        ))
        .unwrap();
        assert_eq!(
            login_of(&settings).client_secret,
            Some(ClientSecret::Unset(unset.into()))
        );
    }

    #[test]
    fn a_client_signing_its_requests_has_its_key_beside_the_config_and_kept_private() {
        let settings = parse(
            "[mcp_servers.a]\nurl = \"https://h/mcp\"\nclient_id = \"c\"\n\
             grant = \"client_credentials\"\nprivate_key_file = \"keys/c.pem\"\n",
        )
        .unwrap();
        let login = login_of(&settings);
        assert_eq!(login.grant, Grant::ClientCredentials);
        let key = PathBuf::from("/c/keys/c.pem");
        assert_eq!(login.private_key_file.as_ref(), Some(&key));
        assert_eq!(settings.key_files().collect::<Vec<_>>(), vec![key]);
    }

    #[test]
    fn refuses_a_secret_without_its_client_or_twice_and_a_plain_metadata_url() {
        for (table, field) in [
            ("client_secret = \"s\"\n", "client_secret"),
            (
                "client_id = \"c\"\nclient_secret = \"s\"\nclient_secret_env = \"S\"\n",
                "client_secret",
            ),
            (
                "client_metadata_url = \"http://kin.example/c.json\"\n",
                "client_metadata_url",
            ),
            (
                "client_metadata_url = \"https://kin.example\"\n",
                "client_metadata_url",
            ),
            (
                "client_id = \"c\"\ngrant = \"client_credentials\"\n",
                "grant",
            ),
            (
                "client_id = \"c\"\nclient_secret = \"s\"\ngrant = \"client_credentials\"\nprivate_key_file = \"k.pem\"\n",
                "private_key_file",
            ),
            ("client_id = \"c\"\nprivate_key_file = \"k.pem\"\n", "private_key_file"),
            ("grant = \"password\"\n", "grant"),
            (
                "client_id = \"c\"\nclient_secret = \"s\"\ngrant = \"enterprise\"\nidp_issuer = \"https://i\"\n",
                "grant",
            ),
        ] {
            let error = parse(&format!(
                "[mcp_servers.a]\nurl = \"https://h/mcp\"\n{table}"
            ))
            .unwrap_err()
            .to_string();
            assert!(error.contains(&format!("mcp_servers.a.{field}")), "{error}");
        }
    }

    #[test]
    fn refuses_incomplete_tables() {
        let error = parse("[mcp_servers.a]\nargs = []\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("mcp_servers.a.command"), "{error}");
        let error = parse("[mcp_servers.a]\nurl = \"ftp://x\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("mcp_servers.a.url"), "{error}");
    }
}
