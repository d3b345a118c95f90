//! Tests of the peer: answers, ordering, cancellation, end of input, long lines.

use super::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Answers `echo` with its params and `wait` only when cancelled; records notifications.
struct TestHandler {
    notes: Mutex<Vec<String>>,
}

impl Handler for TestHandler {
    fn request(&self, method: String, params: Value, cx: RequestContext) -> Reply {
        match method.as_str() {
            "now" => Reply::Now(Ok(params)),
            "then" => {
                let peer = cx.peer.clone();
                Reply::NowThen(Ok(params), Box::new(move || peer.notify("after", &())))
            }
            "echo" => Reply::Later(async move { Ok(params) }.boxed()),
            "big" => Reply::Now(Ok(Value::from("x".repeat(TEST_MAX_LINE)))),
            "measure" => Reply::Now(Ok(measure(params["data"].as_str().map(str::as_bytes)))),
            "wait" => Reply::Later(
                async move {
                    cx.cancel.cancelled().await;
                    Err(RpcError::cancelled())
                }
                .boxed(),
            ),
            _ => Reply::Now(Err(RpcError::method_not_found(&method))),
        }
    }

    fn notification(&self, method: String, _params: Value) {
        self.notes.lock().unwrap().push(method);
    }
}

/// What a test learns of a long string: its length, and whether it is all `A`s.
fn measure(text: Option<&[u8]>) -> Value {
    let text = text.unwrap_or_default();
    json!({"len": text.len(), "all_a": text.iter().all(|&b| b == b'A')})
}

type Output = tokio::io::Lines<BufReader<tokio::io::DuplexStream>>;

/// The line cap of the test peer: small, so over-long messages are cheap to make.
const TEST_MAX_LINE: usize = 64 * 1024;

/// A peer serving `TestHandler` over two in-memory pipes (one per direction, so dropping
/// the test's input end is end of input); the test writes `input` and reads `output`.
fn serve() -> (Peer, tokio::io::DuplexStream, Output, JoinHandle<()>) {
    let (input, their_read) = tokio::io::duplex(1 << 20);
    let (their_write, output) = tokio::io::duplex(1 << 20);
    let (peer, writer) = Peer::with_max_line(their_write, TEST_MAX_LINE);
    let handler = Arc::new(TestHandler {
        notes: Mutex::new(Vec::new()),
    });
    let serving = peer.clone();
    let task = tokio::spawn(async move {
        serving
            .serve(their_read, handler, CancellationToken::new())
            .await;
        serving.close(writer).await;
    });
    (peer, input, BufReader::new(output).lines(), task)
}

async fn next(lines: &mut Output) -> Value {
    serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap()
}

/// No line goes out longer than we would accept: an over-long answer becomes an error
/// answer, an over-long request fails at once, an over-long notification is not sent.
#[tokio::test]
async fn no_outgoing_line_is_longer_than_an_incoming_one_may_be() {
    let (peer, mut input, mut output, _task) = serve();
    let huge = "y".repeat(TEST_MAX_LINE);
    peer.notify("too/big", &huge);
    let error = peer.request("too/big", &huge).await.unwrap_err();
    assert!(error.to_string().contains("could not be sent"), "{error}");
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"big\"}\n")
        .await
        .unwrap();
    let answer = next(&mut output).await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], RpcError::INTERNAL_ERROR);
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("longer than"));
}

/// A line of megabytes reaches the handler whole, and so does an answer we get.
#[tokio::test]
async fn long_strings_reach_handlers_and_answers_whole() {
    let (peer, mut input, mut output, _task) = serve();
    let data = "A".repeat(2 << 20);
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "measure",
        "params": {"data": data, "other": "B".repeat(1 << 17)}});
    input
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    let answer = next(&mut output).await;
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"], json!({"len": data.len(), "all_a": true}));
    let asking = tokio::spawn(async move { peer.request("ask", &()).await });
    let request = next(&mut output).await;
    let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"text": data}});
    input
        .write_all(format!("{reply}\n").as_bytes())
        .await
        .unwrap();
    let answer = asking.await.unwrap().unwrap();
    assert!(
        answer["text"] == data.as_str(),
        "the answer's string is put back"
    );
}

#[tokio::test]
async fn answers_requests_with_their_ids_unchanged() {
    let (_peer, mut input, mut output, _task) = serve();
    input
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"echo\",\"params\":{\"x\":1}}\n",
        )
        .await
        .unwrap();
    let answer = next(&mut output).await;
    assert_eq!(answer, json!({"jsonrpc":"2.0","id":"abc","result":{"x":1}}));
}

/// The work of a `NowThen` reply starts only once its answer is out: what it sends
/// follows the answer.
#[tokio::test]
async fn work_after_an_answer_runs_once_the_answer_is_written() {
    let (_peer, mut input, mut output, _task) = serve();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"then\",\"params\":[7]}\n")
        .await
        .unwrap();
    assert_eq!(
        next(&mut output).await,
        json!({"jsonrpc":"2.0","id":1,"result":[7]})
    );
    assert_eq!(next(&mut output).await["method"], "after");
}

#[tokio::test]
async fn minus_zero_ids_are_written_back_as_minus_zero() {
    let (_peer, mut input, mut output, _task) = serve();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"echo\"}\n{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"echo\",\"params\":true}\n")
        .await
        .unwrap();
    // The error is written at once, the answer by the request's task: either may be first.
    let mut replies = vec![
        output.next_line().await.unwrap().unwrap(),
        output.next_line().await.unwrap().unwrap(),
    ];
    replies.sort();
    assert!(
        replies[0].starts_with(r#"{"jsonrpc":"2.0","id":-0,"error":{"code":-32600"#),
        "{replies:?}"
    );
    assert_eq!(replies[1], r#"{"jsonrpc":"2.0","id":-0,"result":{}}"#);
}

#[tokio::test]
async fn replies_known_at_once_are_answered_in_arrival_order() {
    let (_peer, mut input, mut output, _task) = serve();
    let lines = (1..=3)
        .map(|id| {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"now\",\"params\":[{id}]}}\n")
        })
        .collect::<String>();
    input.write_all(lines.as_bytes()).await.unwrap();
    for id in 1..=3 {
        assert_eq!(
            next(&mut output).await,
            json!({"jsonrpc":"2.0","id":id,"result":[id]})
        );
    }
}

#[tokio::test]
async fn outgoing_requests_match_replies_by_number_or_string() {
    let (peer, mut input, mut output, _task) = serve();
    let asking = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("ask", &json!({})).await }
    });
    let request = next(&mut output).await;
    assert_eq!(request["method"], "ask");
    let id = request["id"].as_i64().unwrap();
    let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":42}}\n");
    input.write_all(reply.as_bytes()).await.unwrap();
    assert_eq!(asking.await.unwrap(), Ok(json!(42)));
}

#[tokio::test]
async fn cancelling_an_outgoing_request_tells_the_peer_and_still_takes_its_answer() {
    let (peer, mut input, mut output, _task) = serve();
    let cancel = CancellationToken::new();
    let asking = tokio::spawn({
        let (peer, cancel) = (peer.clone(), cancel.clone());
        async move { peer.request_cancellable("ask", &json!({}), &cancel).await }
    });
    let id = next(&mut output).await["id"].as_i64().unwrap();
    cancel.cancel();
    let notice = next(&mut output).await;
    assert_eq!(notice["method"], CANCEL_REQUEST);
    assert_eq!(notice["params"]["requestId"], id);
    let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32800,\"message\":\"cancelled\"}}}}\n");
    input.write_all(reply.as_bytes()).await.unwrap();
    assert_eq!(
        asking.await.unwrap().unwrap_err().code,
        RpcError::REQUEST_CANCELLED
    );
}

#[tokio::test]
async fn cancel_request_notification_cancels_an_incoming_request() {
    let (_peer, mut input, mut output, _task) = serve();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"wait\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":9}}\n")
        .await
        .unwrap();
    let answer = next(&mut output).await;
    assert_eq!(answer["id"], 9);
    assert_eq!(answer["error"]["code"], RpcError::REQUEST_CANCELLED);
}

#[tokio::test]
async fn end_of_input_answers_every_open_request_and_fails_pending_ones() {
    let (peer, mut input, mut output, task) = serve();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"wait\"}\n")
        .await
        .unwrap();
    let asking = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("ask", &json!({})).await }
    });
    assert_eq!(next(&mut output).await["method"], "ask");
    drop(input);
    let answer = next(&mut output).await;
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], RpcError::REQUEST_CANCELLED);
    assert_eq!(asking.await.unwrap(), Err(RpcError::connection_closed()));
    task.await.unwrap();
    assert!(
        output.next_line().await.unwrap().is_none(),
        "writer closed after the last answer"
    );
    assert!(peer.request("late", &json!({})).await.is_err());
}
