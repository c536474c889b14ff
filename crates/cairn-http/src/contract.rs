//! The rules the server enforces, written into its OpenAPI document, so that the document is the
//! contract: a client generated from it, or a fuzzer driven by it, sends what the server takes
//! and reads what it answers.
//!
//! The handlers' annotations give each route's shapes; this pass adds what they cannot say, each
//! from the one place the server checks it:
//!
//! - every name and id as a pattern with its length (from the name types' rules), every status
//!   as an enum, durations as the forms each field takes within its bounds, `limit` as a range;
//! - bodies that may be empty as optional, and the statuses every guarded route can answer
//!   (`401`; `403` and `415` on those that change something; `408` and `413` where a body is
//!   read);
//! - the bearer security scheme (`/healthz` and the dashboard's page need none);
//! - links from a started run to the routes that read and steer it, for stateful clients.

use cairn::store::{EventId, EventName, IdempotencyKey, Reason, ScheduleName, WorkflowName};
use cairn::{RunId, RunStatus};
use serde_json::{Map, Value, json};
use utoipa::openapi::OpenApi;

/// The character class of a name: no control character (what `char::is_control` means: C0,
/// DEL and C1) and none of `forbidden`.
fn name_class(forbidden: &[char]) -> String {
    let mut class = String::from("[^\\u0000-\\u001F\\u007F-\\u009F");
    for c in forbidden {
        class.push_str(&format!("\\u{:04X}", u32::from(*c)));
    }
    class.push(']');
    class
}

/// A name's schema: 1 to `max` characters of [`name_class`].
fn name(description: &str, max: usize, forbidden: &[char]) -> Value {
    json!({
        "type": "string",
        "description": description,
        "minLength": 1,
        "maxLength": max,
        "pattern": format!("^{}{{1,{max}}}$", name_class(forbidden)),
    })
}

/// A duration as text: one term (`30s`) or two (`1h 30m`), each of at most `digits` digits and
/// one of `units`; `zero` whether a term may be 0. Each field's forms are chosen so that any
/// text they match is within that field's bounds.
fn duration(description: &str, digits: usize, units: &str, terms: usize, zero: bool) -> Value {
    let number = if zero { format!("[0-9]{{1,{digits}}}") } else { format!("[1-9][0-9]{{0,{}}}", digits - 1) };
    let term = format!("{number}({units})");
    json!({
        "type": "string",
        "description": description,
        "pattern": format!("^{term}( ?{term}){{0,{}}}$", terms - 1),
    })
}

/// A field of one cron expression: `*`, `*/step`, or a list of up to four values in `values`.
fn cron_field(values: &str) -> String {
    format!("(\\*(/[1-6])?|{values}(,{values}){{0,3}})")
}

/// A cron expression: five fields (minute, hour, day of month, month, day of week), or six
/// with seconds first.
fn cron() -> Value {
    let sixty = cron_field("([0-9]|[1-5][0-9])");
    let rest = [
        cron_field("([0-9]|1[0-9]|2[0-3])"),
        cron_field("([1-9]|[12][0-9]|3[01])"),
        cron_field("([1-9]|1[0-2])"),
        cron_field("[0-6]"),
    ]
    .join(" ");
    json!({
        "type": "string",
        "description": "A cron expression: `minute hour day-of-month month day-of-week`, or six fields with \
            seconds first. Each field is `*`, `*/n` (n from 1 to 6) or a list of up to four values.",
        "pattern": format!("^({sixty} )?{sixty} {rest}$"),
    })
}

// `CatchUp`'s pattern spells out its largest `all:N`.
const _: () = assert!(cairn::MAX_CATCH_UP == 1000, "CatchUp's pattern spells out all:1000");

/// The schemas of the rules, by component name.
fn rules() -> Map<String, Value> {
    let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
    let rules = json!({
        "WorkflowName": name("A workflow's name.", WorkflowName::MAX_CHARS, WorkflowName::FORBIDDEN),
        "RunId": name("A run's id.", RunId::MAX_CHARS, RunId::FORBIDDEN),
        "EventName": name("A signal's name: the event a wait asks for.", EventName::MAX_CHARS, EventName::FORBIDDEN),
        "ScheduleName": name("A schedule's name.", ScheduleName::MAX_CHARS, ScheduleName::FORBIDDEN),
        "IdempotencyKey": name("Starts of one workflow with the same key find one run.",
            IdempotencyKey::MAX_CHARS, IdempotencyKey::FORBIDDEN),
        "FlowKey": name("A fairness or debounce key.", cairn::journal::flow::MAX_FAIRNESS_KEY_CHARS, &[]),
        "EventId": name("A published event's id.", EventId::MAX_CHARS, EventId::FORBIDDEN),
        "Reason": name("Why a run is cancelled or restarted.", Reason::MAX_CHARS, Reason::FORBIDDEN),
        "Topic": {
            "type": "string",
            "description": "A topic: segments of ASCII letters, digits, `_` or `-`, joined by `.`.",
            "minLength": 1,
            "maxLength": cairn::journal::topic::MAX_TOPIC_BYTES,
            "pattern": "^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$",
        },
        "RunStatus": {"type": "string", "enum": statuses},
        "DateTime": {"type": "string", "format": "date-time", "description": "An RFC 3339 time."},
        "Cursor": {
            "type": "string",
            "description": "A page's `next_cursor`, as it was given.",
            "pattern": "^-?[0-9]{1,15}:[^/\\u0000-\\u001F\\u007F-\\u009F]{1,200}$",
        },
        "RunTimeout": duration("A run's deadline after its start, from 1 ms to 10 years (`30m`, `2h`).",
            3, "ms|s|m|h|d", 2, false),
        "DebounceWait": duration("From 1 ms to 30 days (`2s`, `500ms`, `5m`).", 2, "ms|s|m|h", 2, false),
        "ResultWait": duration("How long to wait (`30s`, `5m`); at most 5 minutes are waited.", 3, "ms|s|m", 1, true),
        "Age": duration("An age (`90d`, `12h`).", 4, "ms|s|m|h|d", 2, true),
        "Interval": duration("An interval of at least a second (`30s`, `5m`, `1h`).", 4, "s|m|h|d", 2, false),
        "CronExpression": cron(),
        // Any JSON but NUL, said as "not a value that holds NUL", the one way a generated client
        // still reads it as any JSON: the recursive part sits in `$defs`, where generators that
        // cannot follow it do not look.
        "Payload": {
            "description": "Any JSON value without NUL (`\\u0000`) in its strings and keys, nested at most 100 \
                levels: what a run's input and a signal's or an event's payload may be (every store keeps it).",
            "not": {"$ref": "#/components/schemas/Payload/$defs/HoldsNul"},
            "$defs": {
                "HoldsNul": {
                    "anyOf": [
                        {"type": "string", "pattern": "\\u0000"},
                        {"type": "array", "contains": {"$ref": "#/components/schemas/Payload/$defs/HoldsNul"}},
                        {
                            "type": "object",
                            "not": {
                                "propertyNames": {"pattern": "^[^\\u0000]*$"},
                                "additionalProperties": {"not": {"$ref": "#/components/schemas/Payload/$defs/HoldsNul"}},
                            },
                        },
                    ],
                },
            },
        },
        "TimeZone": {
            "type": "string",
            "description": "An IANA time zone (`UTC`, `Europe/Oslo`); a name the server's time zone database does \
                not hold is `404 unknown_time_zone`.",
            "maxLength": 64,
            "pattern": "^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$",
        },
        "JsonPatch": {
            "type": "array",
            "description": "What changed in a live stream's snapshot since the one last sent (RFC 6902; only `add`, \
                `remove` and `replace`).",
            "items": {
                "type": "object",
                "required": ["op", "path"],
                "properties": {
                    "op": {"type": "string", "enum": ["add", "remove", "replace"]},
                    "path": {"type": "string", "description": "A JSON Pointer (RFC 6901)."},
                    "value": {},
                },
            },
        },
        "CatchUp": {
            "type": "string",
            "description": "`skip`, `once`, or `all:N` (N from 1 to 1000).",
            "pattern": "^(skip|once|all:([1-9][0-9]{0,2}|1000))$",
        },
    });
    match rules {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn reference(component: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{component}")})
}

/// What a path parameter is, by its name and the route's path.
fn path_parameter(path: &str, name: &str) -> Option<&'static str> {
    Some(match name {
        "name" if path.starts_with("/v1/schedules") => "ScheduleName",
        "name" => "WorkflowName",
        "id" => "RunId",
        "event" => "EventName",
        "topic" => "Topic",
        _ => return None,
    })
}

/// What a query parameter is.
fn query_parameter(path: &str, name: &str) -> Option<Value> {
    Some(match name {
        "workflow" => reference("WorkflowName"),
        "status" => reference("RunStatus"),
        "cursor" => reference("Cursor"),
        "since" | "until" => json!({"type": "string", "format": "date-time"}),
        "limit" => json!({"type": "integer", "minimum": 1, "maximum": 1000}),
        "at_most" => json!({"type": "integer", "minimum": 1, "maximum": 100_000}),
        "timeout" if path.ends_with("/result") => reference("ResultWait"),
        "topic" => reference("Topic"),
        "reason" => reference("Reason"),
        _ => return None,
    })
}

/// The body fields whose rules their types do not carry: component, field, rule.
const FIELDS: &[(&str, &str, &str)] = &[
    ("StartBody", "input", "Payload"),
    ("PublishBody", "payload", "Payload"),
    ("ScheduleBody", "input", "Payload"),
    ("StartBody", "id", "RunId"),
    ("StartBody", "idempotencyKey", "IdempotencyKey"),
    ("StartBody", "fairnessKey", "FlowKey"),
    ("StartBody", "timeout", "RunTimeout"),
    ("DebounceBody", "key", "FlowKey"),
    ("DebounceBody", "quiet", "DebounceWait"),
    ("DebounceBody", "maxWait", "DebounceWait"),
    ("PublishBody", "id", "EventId"),
    ("RestartBody", "reason", "Reason"),
    ("PruneBody", "olderThan", "Age"),
    ("ScheduleBody", "workflow", "WorkflowName"),
    ("ScheduleBody", "timeZone", "TimeZone"),
    ("ScheduleBody", "every", "Interval"),
    ("ScheduleBody", "catchUp", "CatchUp"),
    ("BulkFilter", "workflow", "WorkflowName"),
    ("BulkFilter", "status", "RunStatus"),
    ("BulkFilter", "since", "DateTime"),
    ("BulkFilter", "until", "DateTime"),
];

/// The routes a started run's answer links to: link name, operation id (the handler's name).
const RUN_LINKS: &[(&str, &str)] = &[
    ("GetRun", "show"),
    ("GetSteps", "steps"),
    ("GetSignals", "signals"),
    ("GetResult", "result"),
    ("SendSignal", "signal"),
    ("PauseRun", "pause"),
    ("ResumeRun", "resume"),
    ("CancelRun", "cancel"),
    ("RestartRun", "restart"),
];

/// The routes a schedule's answer links to.
const SCHEDULE_LINKS: &[(&str, &str)] = &[
    ("GetSchedule", "show_schedule"),
    ("PauseSchedule", "pause_schedule"),
    ("ResumeSchedule", "resume_schedule"),
    ("TriggerSchedule", "trigger_schedule"),
    ("DeleteSchedule", "delete_schedule"),
];

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": reference("ErrorBody")}}})
}

/// `document` (the handlers') with the rules written in.
pub(crate) fn written_in(document: &OpenApi) -> Value {
    let mut json = serde_json::to_value(document).unwrap_or_default();
    apply(&mut json);
    json
}

/// Writes the rules into `document` (the handlers' document as JSON).
fn apply(document: &mut Value) {
    let mut rules = rules();
    if let Some(schemas) = document.pointer_mut("/components/schemas").and_then(Value::as_object_mut) {
        for (component, field, rule) in FIELDS {
            if let Some(property) =
                schemas.get_mut(*component).and_then(|s| s.pointer_mut(&format!("/properties/{field}")))
            {
                let nullable = *rule != "Payload" && property.to_string().contains("\"null\"");
                *property = match nullable {
                    true => json!({"oneOf": [{"type": "null"}, reference(rule)]}),
                    false => reference(rule),
                };
            }
        }
        if let Some(schedule) = schemas.get_mut("ScheduleBody") {
            schedule["properties"]["cron"] = json!({"type": "array", "items": reference("CronExpression")});
            // Cron expressions or an interval, not both (an empty list or a `null` is none).
            let cron = json!({"required": ["cron"], "properties": {"cron": {"minItems": 1}}});
            let every = json!({"required": ["every"], "properties": {"every": {"type": "string"}}});
            schedule["oneOf"] = json!([
                {"allOf": [cron, {"not": every}]},
                {"allOf": [every, {"not": cron}]},
            ]);
        }
        if let Some(start) = schemas.get_mut("StartBody") {
            // A debounced start has no idempotency key (its runs collapse by the debounce key).
            start["not"] = json!({
                "required": ["debounce", "idempotencyKey"],
                "properties": {"debounce": {"type": "object"}, "idempotencyKey": {"type": "string"}},
            });
            // The integers' ranges are their types' (what the server reads them into).
            for (field, low, high) in [
                ("priority", i64::from(i32::MIN), i64::from(i32::MAX)),
                ("version", 0, i64::from(u32::MAX)),
                ("retentionDays", 0, i64::from(u32::MAX)),
            ] {
                if let Some(property) = start.pointer_mut(&format!("/properties/{field}")) {
                    property["minimum"] = json!(low);
                    property["maximum"] = json!(high);
                }
            }
        }
        if let Some(limit) = schemas.get_mut("BulkBody").and_then(|bulk| bulk.pointer_mut("/properties/limit")) {
            limit["minimum"] = json!(1);
            limit["maximum"] = json!(1000);
        }
        schemas.append(&mut rules);
    }
    widen_unsigned(document);
    document["components"]["securitySchemes"] =
        json!({"bearer": {"type": "http", "scheme": "bearer", "description": "`Authorization: Bearer <CAIRN_TOKEN>`"}});
    document["security"] = json!([{"bearer": []}]);
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else { continue };
        for (method, operation) in item.iter_mut() {
            document_operation(path, method != "get", operation);
        }
    }
}

/// Every `u32` as `int64`: utoipa writes a `u32` as `"format": "int32"` with `"minimum": 0`, and
/// tools read `int32` as at most 2³¹ − 1, so a version or a retention of 3,000,000,000 (which the
/// server takes, and answers with) would break the document.
fn widen_unsigned(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("format").is_some_and(|f| f == "int32") && map.get("minimum").is_some_and(|m| m == 0) {
                map.insert("format".to_owned(), json!("int64"));
            }
            map.values_mut().for_each(widen_unsigned);
        }
        Value::Array(items) => items.iter_mut().for_each(widen_unsigned),
        _ => {}
    }
}

/// The document of a server without a token: no security scheme and no `401` answers, so that
/// tools that trust the document (generated clients, fuzzers) send no token and expect none.
pub(crate) fn without_token(mut document: Value) -> Value {
    if let Some(object) = document.as_object_mut() {
        object.remove("security");
    }
    if let Some(components) = document.get_mut("components").and_then(Value::as_object_mut) {
        components.remove("securitySchemes");
    }
    let paths = document.get_mut("paths").and_then(Value::as_object_mut).into_iter().flat_map(|p| p.values_mut());
    for operation in paths.filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        if let Some(operation) = operation.as_object_mut() {
            operation.remove("security");
            if let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) {
                responses.remove("401");
            }
        }
    }
    document
}

/// One operation's parameters, body and answers.
fn document_operation(path: &str, mutating: bool, operation: &mut Value) {
    let id = operation["operationId"].as_str().unwrap_or_default().to_owned();
    let open = path == "/healthz" || path == "/";
    if open {
        operation["security"] = json!([{}]);
        return;
    }
    if let Some(parameters) = operation.get_mut("parameters").and_then(Value::as_array_mut) {
        // `workflow` is given by the path where the path names one.
        parameters.retain(|parameter| !(parameter["name"] == "workflow" && path.contains("{name}")));
        for parameter in parameters {
            let name = parameter["name"].as_str().unwrap_or_default().to_owned();
            let schema = match parameter["in"].as_str() {
                Some("path") => path_parameter(path, &name).map(reference),
                Some("query") => query_parameter(path, &name),
                _ => None,
            };
            if let Some(schema) = schema {
                parameter["schema"] = schema;
            }
        }
    }
    // A live stream's events: OpenAPI 3.2's form, each event's `data` the JSON of its schema (the
    // snapshot, named for the route, a patch of it, or an error).
    if let Some(stream) = operation.pointer_mut("/responses/200/content/text~1event-stream") {
        let snapshot = if id == "live_runs" { "runs" } else { "run" };
        let event = |name: &str, data: Value| {
            json!({
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"const": name},
                    "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
                },
            })
        };
        let data = stream["schema"].take();
        stream["schema"] = json!({"oneOf": [
            event(snapshot, data),
            event("patch", reference("JsonPatch")),
            event("error", reference("ErrorBody")),
        ]});
    }
    let has_parameters = operation.get("parameters").is_some();
    let responses = &mut operation["responses"];
    responses["401"] = error_response("No token, or not this server's (`Authorization: Bearer <token>`)");
    if has_parameters && responses.get("400").is_none() {
        responses["400"] = error_response("A parameter breaks its rule");
    }
    if id == "signal"
        && let Some(schema) = operation.pointer_mut("/requestBody/content/application~1json/schema")
    {
        *schema = reference("Payload");
    }
    if let Some(body) = operation.get_mut("requestBody") {
        // A start, a signal, a publish and a prune read an empty body as their defaults.
        if matches!(id.as_str(), "start" | "signal" | "publish" | "prune") {
            body["required"] = json!(false);
        }
        let responses = &mut operation["responses"];
        responses["413"] = error_response("The body is larger than the server takes");
        responses["408"] = error_response("The body did not arrive within the server's body timeout");
        if responses.get("400").is_none() {
            responses["400"] = error_response("The body is not valid JSON or breaks a rule");
        }
    }
    if mutating {
        let responses = &mut operation["responses"];
        responses["403"] = error_response("Sent by a page on an origin the server does not allow");
        responses["415"] = error_response("A body that is not `application/json`");
    }
    let links = match id.as_str() {
        "start" => Some((RUN_LINKS, "$request.path.name", Some("$response.body#/id"))),
        "put_schedule" => Some((SCHEDULE_LINKS, "$request.path.name", None)),
        _ => None,
    };
    if let Some((targets, name, run)) = links {
        let links: Map<String, Value> = targets
            .iter()
            .map(|(link, target)| {
                let mut parameters = json!({"name": name});
                if let Some(run) = run {
                    parameters["id"] = json!(run);
                }
                ((*link).to_owned(), json!({"operationId": target, "parameters": parameters}))
            })
            .collect();
        for status in ["200", "201"] {
            if let Some(response) = operation["responses"].get_mut(status) {
                response["links"] = Value::Object(links.clone());
            }
        }
    }
}
