"""Drives a real `cairn serve --examples` through a client that openapi-python-client generated
from the server's own `/openapi.json` (crates/cairn-cli/tests/contract.rs runs it).

Usage: generated_client.py PACKAGE_DIR BASE_URL TOKEN (an empty TOKEN: the server takes none)

It runs `hello` start -> result and `approval` start -> signal -> result, reading every answer
through the generated models (which raise when an answer breaks the document).
"""

import sys

package_dir, base_url, token = sys.argv[1:4]
sys.path.insert(0, package_dir)

from cairn_client import AuthenticatedClient, Client  # noqa: E402
from cairn_client.api.runs import result, signal, start  # noqa: E402
from cairn_client.models import RunDetail, SignalSent, StartBody, StartedRun  # noqa: E402


def started(client, workflow, body):
    answer = start.sync_detailed(workflow, client=client, body=StartBody.from_dict(body))
    assert answer.status_code == 201, (answer.status_code, answer.content)
    assert isinstance(answer.parsed, StartedRun), answer.parsed
    return answer.parsed


def ended(client, workflow, run_id):
    answer = result.sync_detailed(workflow, run_id, client=client, timeout="30s")
    assert answer.status_code == 200, (answer.status_code, answer.content)
    assert isinstance(answer.parsed, RunDetail), answer.parsed
    return answer.parsed


connect = (
    AuthenticatedClient(base_url=base_url, token=token, timeout=60) if token else Client(base_url=base_url, timeout=60)
)
with connect as client:
    hello = started(client, "hello", {"input": {"name": "ada"}})
    done = ended(client, "hello", hello.id)
    assert (done.status, done.output) == ("completed", "Hello, ada!"), (done.status, done.output)

    approval = started(client, "approval", {"input": None})
    sent = signal.sync_detailed("approval", approval.id, "approve", client=client, body={"by": "grace"})
    assert sent.status_code == 200 and isinstance(sent.parsed, SignalSent), (sent.status_code, sent.content)
    done = ended(client, "approval", approval.id)
    assert (done.status, done.output) == ("completed", {"by": "grace"}), (done.status, done.output)

print("generated client: hello and approval completed")
