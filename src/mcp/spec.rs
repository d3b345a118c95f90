//! Where an MCP server is and how to reach it: a stdio command or an HTTP endpoint, from the
//! editor's `mcpServers` or the config file's `[mcp_servers.<name>]`, merged by name.

use std::path::PathBuf;

use std::fmt;
use std::time::Duration;

/// One MCP server a session uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The name it was given (unique within a session); part of its tools' names.
    pub name: String,
    /// How kin reaches the server.
    pub transport: Transport,
    /// How long one tool call may take (`call_timeout` of a configured server); the default
    /// when `None`.
    pub call_timeout: Option<Duration>,
}

/// How kin talks to an MCP server.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A command kin starts and speaks to over its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Added to the scrubbed environment.
        env: Vec<(String, String)>,
    },
    /// A streamable-HTTP endpoint, with headers sent on every request.
    Http {
        /// The endpoint.
        url: String,
        /// Header names and values.
        headers: Vec<(String, String)>,
        /// How kin signs in beyond the headers: `Some` for a server of the config file (an
        /// OAuth login kin keeps, `kin mcp login`), `None` for the editor's (its headers only).
        login: Option<OAuthSettings>,
    },
    /// The old HTTP+SSE transport: kin does not speak it, and says so.
    Sse {
        /// The endpoint.
        url: String,
    },
}

/// What a configured HTTP server's OAuth login uses beyond discovery (`client_id`, `scopes`
/// of its `[mcp_servers.<name>]` entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthSettings {
    /// A client id registered with the authorization server beforehand; without one kin
    /// registers itself where the server offers dynamic registration.
    pub client_id: Option<String>,
    /// The scopes to ask for; the server's advertised ones when empty.
    pub scopes: Vec<String>,
    /// The secret of the pre-registered `client_id` (a confidential client).
    pub client_secret: Option<ClientSecret>,
    /// Instead of a secret, the client's own P-256 key (a PKCS#8 PEM file): kin signs an
    /// assertion with it for each token request (`private_key_jwt`, ES256).
    pub private_key_file: Option<PathBuf>,
    /// The HTTPS URL of kin's client metadata document, used as the client id where the
    /// authorization server takes one (`client_id_metadata_document_supported`).
    pub client_metadata_url: Option<String>,
    /// How kin gets tokens.
    pub grant: Grant,
}

/// How kin gets a configured server's tokens (`grant`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Grant {
    /// A user logs in in the browser (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// As the client itself, with its id and its secret or signing key: no user, no browser
    /// (the MCP client credentials extension).
    ClientCredentials,
    /// From the user's enterprise identity: the ID token `id_token_command` prints is exchanged
    /// at the enterprise IdP for an identity assertion (ID-JAG), which the server's
    /// authorization server takes for a token (the MCP enterprise-managed authorization
    /// extension). No browser.
    Enterprise(Box<EnterpriseIdp>),
}

/// The enterprise identity provider of [`Grant::Enterprise`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnterpriseIdp {
    /// Its issuer identifier (`idp_issuer`).
    pub issuer: String,
    /// Its token endpoint (`idp_token_endpoint`).
    pub token_endpoint: String,
    /// kin's (public) client there (`idp_client_id`).
    pub client_id: String,
    /// Prints the user's ID token from that IdP (`id_token_command`).
    pub id_token_command: String,
}

impl OAuthSettings {
    /// Whether its logins need no one (and no browser): a fresh token whenever one is refused.
    pub fn unattended(&self) -> bool {
        self.grant != Grant::AuthorizationCode
    }
}

/// A pre-registered client's secret (`client_secret`, or the variable `client_secret_env`
/// names, read when the config is); debug output never shows it.
#[derive(Clone, PartialEq, Eq)]
pub enum ClientSecret {
    /// The secret.
    Value(String),
    /// `client_secret_env` names this variable, which is not set.
    Unset(String),
}

impl fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(_) => f.write_str("ClientSecret(***)"),
            Self::Unset(name) => write!(f, "ClientSecret(unset ${name})"),
        }
    }
}

/// Values of env and headers are secrets as often as not: debug output masks them.
impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Transport {
    /// One line for people: command or URL, with env and header values masked.
    pub(crate) fn describe(&self) -> String {
        let names = |pairs: &[(String, String)]| {
            let masked: Vec<String> = pairs.iter().map(|(k, _)| format!("{k}=***")).collect();
            masked.join(", ")
        };
        match self {
            Self::Stdio { command, args, env } => {
                let mut line = std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" ");
                if !env.is_empty() {
                    line.push_str(&format!(" (env: {})", names(env)));
                }
                format!("stdio: {line}")
            }
            Self::Http { url, headers, .. } => {
                let mut line = format!("http: {url}");
                if !headers.is_empty() {
                    line.push_str(&format!(" (headers: {})", names(headers)));
                }
                line
            }
            Self::Sse { url } => format!("sse: {url}"),
        }
    }
}

impl ServerSpec {
    /// The server as an ACP `mcpServers` entry (what kin passes on to an ACP child).
    pub(crate) fn to_acp(&self) -> serde_json::Value {
        let pairs = |pairs: &[(String, String)]| {
            let listed = pairs.iter();
            listed
                .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
                .collect::<Vec<_>>()
        };
        match &self.transport {
            Transport::Stdio { command, args, env } => serde_json::json!({
                "name": self.name, "command": command, "args": args, "env": pairs(env)
            }),
            Transport::Http { url, headers, .. } => serde_json::json!({
                "type": "http", "name": self.name, "url": url, "headers": pairs(headers)
            }),
            Transport::Sse { url } => serde_json::json!({
                "type": "sse", "name": self.name, "url": url, "headers": []
            }),
        }
    }
}

/// `configured` servers with `editor`'s on top: an editor's server replaces a configured one
/// of the same name. Configured ones come first, in their order, then the editor's new ones.
pub fn merge(configured: &[ServerSpec], editor: Vec<ServerSpec>) -> Vec<ServerSpec> {
    let mut merged: Vec<ServerSpec> = configured
        .iter()
        .filter(|spec| editor.iter().all(|e| e.name != spec.name))
        .cloned()
        .collect();
    for spec in editor {
        match merged.iter_mut().find(|m| m.name == spec.name) {
            // Two editor entries of one name: the later wins.
            Some(same) => *same = spec,
            None => merged.push(spec),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(name: &str, command: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args: vec![],
                env: vec![("TOKEN".into(), "secret".into())],
            },
            call_timeout: None,
        }
    }

    #[test]
    fn the_editor_wins_by_name() {
        let configured = [stdio("db", "configured-db"), stdio("docs", "docs")];
        let merged = merge(&configured, vec![stdio("db", "editor-db"), stdio("x", "x")]);
        let names: Vec<_> = merged.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["docs", "db", "x"]);
        assert!(merged[1].transport.describe().contains("editor-db"));
    }

    #[test]
    fn descriptions_mask_values() {
        let line = stdio("db", "run").transport.describe();
        assert_eq!(line, "stdio: run (env: TOKEN=***)");
        assert!(!format!("{:?}", stdio("db", "run")).contains("secret"));
        let http = Transport::Http {
            url: "http://h/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer x".into())],
            login: None,
        };
        assert_eq!(
            http.describe(),
            "http: http://h/mcp (headers: Authorization=***)"
        );
    }
}
