//! [`TypedTool`]: a tool written against its own argument type. A blanket impl makes every
//! typed tool a [`Tool`]: it parses the model's arguments once into `Args` (a failure is the
//! usual `InvalidArguments` result) and builds the parameters schema from `Args`.
//!
//! The schema is generated with `schemars` and then trimmed to the plain JSON Schema the tool
//! contract (`protocol/schemas/tools/*.json`) uses: no `$schema`/`title`, no `format`, and no
//! `null` type or `default` for optional fields (their defaults are told in the descriptions).

use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use futures::FutureExt;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{SpecScope, Tool, ToolContext, ToolDisplay, ToolKind, ToolOutput};
use crate::model::ToolSpec;
use crate::sync::lock;

/// A model-facing tool with typed arguments; see the module docs.
pub(crate) trait TypedTool: Clone + Send + Sync + 'static {
    /// The name the model calls it by.
    const NAME: &'static str;
    /// What the model is told the tool does.
    const DESCRIPTION: &'static str;
    /// The arguments; their schema is the tool's `parameters`.
    type Args: DeserializeOwned + JsonSchema + Send;

    /// The name of this instance: [`Self::NAME`] unless the tool is bound to something that
    /// names it (a delegation provider).
    fn name(&self) -> &str {
        Self::NAME
    }
    /// What the model is told, when it depends on the instance.
    fn description(&self) -> String {
        Self::DESCRIPTION.into()
    }
    /// What the tool found in `scope` for the session to know (see [`Tool::workspace_note`]).
    fn workspace_note(&self, scope: SpecScope<'_>) -> Option<String> {
        let _ = scope;
        None
    }
    /// The parameters schema: generated from `Args`; an instance may reword descriptions.
    fn parameters(&self) -> Arc<Value> {
        parameters::<Self::Args>()
    }
    fn kind(&self) -> ToolKind;
    /// Whether every result, an argument error included, is hidden from the editor's tool
    /// calls (`update_plan` is shown as a plan instead).
    fn hidden(&self) -> bool {
        false
    }
    /// A short human title for the call; `None` when its arguments do not parse.
    fn title(&self, args: Option<&Self::Args>) -> String;
    /// Whether the call may run side by side with its neighbours (see [`Tool::overlaps`]).
    fn overlaps(&self, args: &Self::Args) -> bool {
        let _ = args;
        false
    }
    /// Runs the call; `Err` is an error result like any other. Must return promptly once
    /// `cx.cancel` trips.
    fn run(
        &self,
        args: Self::Args,
        cx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolOutput>> + Send;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> String {
        TypedTool::name(self).into()
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TypedTool::name(self).into(),
            description: TypedTool::description(self),
            parameters: TypedTool::parameters(self),
        }
    }

    fn workspace_note(&self, scope: SpecScope<'_>) -> Option<String> {
        TypedTool::workspace_note(self, scope)
    }

    fn kind(&self) -> ToolKind {
        TypedTool::kind(self)
    }

    fn title(&self, arguments: &Value) -> String {
        let args = T::Args::deserialize(arguments).ok();
        TypedTool::title(self, args.as_ref())
    }

    fn overlaps(&self, arguments: &Value) -> bool {
        T::Args::deserialize(arguments).is_ok_and(|args| TypedTool::overlaps(self, &args))
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let tool = self.clone();
        let name = TypedTool::name(self).to_owned();
        let hidden = TypedTool::hidden(self);
        async move {
            let args = parse_arguments::<T::Args>(&name, arguments)?;
            tool.run(args, cx).await
        }
        .map(move |result| {
            let output = result.unwrap_or_else(|output| output);
            if hidden {
                output.with_display(ToolDisplay {
                    hidden: true,
                    ..ToolDisplay::default()
                })
            } else {
                output
            }
        })
        .boxed()
    }
}

/// Reads a tool's arguments into its argument type; an error result says what is wrong.
pub(crate) fn parse_arguments<A: DeserializeOwned>(
    tool: &str,
    arguments: Value,
) -> Result<A, ToolOutput> {
    serde_json::from_value(arguments).map_err(|error| {
        ToolOutput::error(
            "InvalidArguments",
            "INVALID_ARGUMENTS",
            format!("Error: invalid arguments for `{tool}`: {error}"),
        )
    })
}

/// A title of `verb` followed by `subject` (a path or a pattern) when there is one.
pub(crate) fn titled(verb: &str, subject: Option<&str>) -> String {
    match subject {
        Some(subject) if !subject.is_empty() => format!("{verb} {subject}"),
        _ => verb.to_owned(),
    }
}

/// The parameters schema of `A`, in the contract's plain form (see the module docs).
///
/// Generated once per type and then shared: every step builds its tool specs, and running
/// `schemars` (or copying its result) each time was most of what starting a child cost.
pub(crate) fn parameters<A: JsonSchema + 'static>() -> Arc<Value> {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Arc<Value>>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Default::default);
    // A poisoned lock only means another thread panicked mid-insert; the map is still whole.
    let mut schemas = lock(schemas);
    schemas
        .entry(TypeId::of::<A>())
        .or_insert_with(|| Arc::new(generate::<A>()))
        .clone()
}

/// Runs `schemars` for `A` and trims the result to the contract's form.
fn generate<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    if let Value::Object(root) = &mut schema {
        // The tool's name and description are the spec's, not the argument type's.
        root.shift_remove("title");
        root.shift_remove("description");
        // A tool without arguments still lists (no) properties: some model APIs want them.
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        plain(root);
    }
    schema
}

/// Trims one (sub)schema and the schemas of its properties.
fn plain(schema: &mut Map<String, Value>) {
    schema.shift_remove("format");
    schema.shift_remove("default");
    // `Option<T>` comes out as `[T, "null"]`; the contract offers just `T`.
    if let Some(Value::Array(types)) = schema.get("type") {
        let named: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let [only] = named[..] {
            let only = only.clone();
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                plain(property);
            }
        }
    }
    // The keywords in the contract files' order, so the model is sent the same bytes.
    let mut ordered = Map::new();
    for key in KEYWORD_ORDER {
        if let Some(value) = schema.shift_remove(*key) {
            ordered.insert((*key).to_owned(), value);
        }
    }
    ordered.append(schema);
    *schema = ordered;
}

const KEYWORD_ORDER: &[&str] = &[
    "type",
    "minimum",
    "maximum",
    "description",
    "properties",
    "required",
    "additionalProperties",
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tasks::tools::{TaskKillTool, TaskListTool, TaskOutputTool};
    use crate::tools::{edit, glob, grep, read, shell, write};

    /// A tool's contract file without the keys that are not its `parameters`.
    fn contract(name: &str) -> Value {
        let path = format!(
            "{}/protocol/schemas/tools/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let mut file: Value = serde_json::from_str(&text).unwrap();
        for key in ["$schema", "$id", "title", "description"] {
            file.as_object_mut().unwrap().shift_remove(key);
        }
        file
    }

    fn assert_same_bytes<T: TypedTool>() {
        // Keyword order too: the model request carries these bytes.
        let generated = serde_json::to_string(&parameters::<T::Args>()).unwrap();
        let expected = serde_json::to_string(&contract(T::NAME)).unwrap();
        assert_eq!(generated, expected, "{}", T::NAME);
    }

    #[test]
    fn generated_parameters_are_the_contract_files_byte_for_byte() {
        assert_same_bytes::<read::ReadTool>();
        assert_same_bytes::<write::WriteTool>();
        assert_same_bytes::<edit::EditTool>();
        assert_same_bytes::<glob::GlobTool>();
        assert_same_bytes::<grep::GrepTool>();
        assert_same_bytes::<shell::ShellTool>();
        assert_same_bytes::<TaskOutputTool>();
        assert_same_bytes::<TaskListTool>();
        assert_same_bytes::<TaskKillTool>();
    }

    #[tokio::test]
    async fn arguments_that_do_not_parse_are_an_invalid_arguments_result() {
        let cx = ToolContext::new("s", std::env::temp_dir(), Default::default());
        let output = Tool::call(&read::ReadTool, json!({"path": 3}), cx).await;
        assert!(output.is_error);
        let error = output.error.unwrap();
        assert_eq!(
            (error.name.as_str(), error.code.as_str()),
            ("InvalidArguments", "INVALID_ARGUMENTS")
        );
        assert!(
            output
                .text
                .starts_with("Error: invalid arguments for `read`: invalid type"),
            "{}",
            output.text
        );
    }

    #[test]
    fn a_title_is_built_from_parsed_arguments_or_falls_back() {
        let title = |arguments: Value| Tool::title(&read::ReadTool, &arguments);
        assert_eq!(title(json!({"path": "a.rs"})), "Read a.rs");
        assert_eq!(title(json!({"path": ""})), "Read");
        assert_eq!(title(json!({"offset": 2})), "Read");
        assert_eq!(title(json!("not an object")), "Read");
    }

    /// A typed tool that counts how often its parameters schema is asked for.
    #[derive(Clone)]
    struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    #[derive(Deserialize, JsonSchema)]
    struct CountedArgs {
        #[allow(dead_code)]
        what: String,
    }

    impl TypedTool for Counted {
        const NAME: &'static str = "counted";
        const DESCRIPTION: &'static str = "Counts its schemas.";
        type Args = CountedArgs;

        fn parameters(&self) -> Arc<Value> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            parameters::<CountedArgs>()
        }
        fn kind(&self) -> super::super::ToolKind {
            super::super::ToolKind::Other
        }
        fn title(&self, _: Option<&CountedArgs>) -> String {
            "Counted".into()
        }
        async fn run(&self, _: CountedArgs, _: ToolContext) -> Result<ToolOutput, ToolOutput> {
            Ok(ToolOutput::ok(""))
        }
    }

    #[test]
    fn looking_a_typed_tool_up_by_name_builds_no_schema() {
        let built = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut registry = crate::tools::ToolRegistry::new();
        registry.register(std::sync::Arc::new(Counted(built.clone())));
        assert!(registry.get("counted").is_some());
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(registry.specs().len(), 1);
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_cached_schema_equals_a_fresh_one() {
        let first = parameters::<CountedArgs>();
        assert_eq!(parameters::<CountedArgs>(), first);
        assert_eq!(generate::<CountedArgs>(), *first);
        assert_eq!(first["required"], json!(["what"]));
    }
}
