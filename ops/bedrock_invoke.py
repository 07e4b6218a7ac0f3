"""Invoke a Bedrock imported model with an OpenAI chat-completions body (bedrock-runtime InvokeModel).

Models imported after 2025-11-11 accept OpenAI chat-completions payloads (seed 003 §12, "API
Compatibility Note"). Name the model by ARN, or by stack and configured model name (the ARN is
read from the stack output ``ImportedModelArn<PascalCaseName>``)::

    python -m ops.bedrock_invoke --region us-east-1 \\
        --stack MangaAssist-prod-BedrockImport --model mangaassist-llama3-domain-v1 \\
        --system "You are a manga shopping assistant." "Recommend action manga under $20."

    python -m ops.bedrock_invoke --model-arn arn:aws:bedrock:...:imported-model/abc "Hello"

Prints the assistant's reply (``--raw`` prints the whole JSON response). Needs AWS credentials
with bedrock:InvokeModel on the model (and kms:Decrypt on the model key) and, with ``--stack``,
cloudformation:DescribeStacks.

A cold imported model answers ModelNotReadyException while Bedrock restores it. botocore retries
it (the service model marks it retryable; Bedrock user guide, "Invoke your imported model":
configure the SDK's retries), so the client is configured, not wrapped in a loop of our own:
standard retry mode, ``--attempts`` tries in all (see :func:`retry_config`).
"""

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, Final

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from cli_support.argtypes import int_in, non_negative_float
from serving_contract.outputs import imported_model_output

DEFAULT_ATTEMPTS: Final = 15
"""InvokeModel tries in all while the model is not ready. botocore's standard mode waits
rand(0, 1) x min(0.05 s x 2^i, 20 s) before retry i for an error that is not throttling
(botocore/retries/standard.py, ExponentialBackoff; ModelNotReadyException is modelled
retryable, not throttling): 15 tries wait about a minute in all (at most ~125 s), as the
former 6 tries 10 s apart did."""


def retry_config(attempts: int) -> Config:
    """botocore client config: standard retry mode, ``attempts`` tries in all (the first included).

    Standard mode, not the legacy one (which an ``AWS_RETRY_MODE`` or profile could select):
    it retries the errors the service model marks retryable, ModelNotReadyException among them."""
    return Config(retries={"mode": "standard", "total_max_attempts": attempts})


def chat_body(prompt: str, *, system: str | None, max_tokens: int, temperature: float) -> dict[str, Any]:
    """An OpenAI chat-completions request body."""
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    return {"messages": messages, "max_tokens": max_tokens, "temperature": temperature}


def model_arn_from_stack(cloudformation: Any, stack_name: str, model_name: str) -> str:
    """The imported model's ARN from the Bedrock stack's outputs; SystemExit names what is missing."""
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    found = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    key = imported_model_output(model_name)
    if key not in found:
        known = ", ".join(sorted(k for k in found if k.startswith("ImportedModelArn"))) or "none"
        raise SystemExit(f"stack {stack_name} has no output {key} (imported model outputs: {known})")
    return str(found[key])


def invoke(runtime: Any, model_arn: str, body: dict[str, Any]) -> dict[str, Any]:
    """InvokeModel with a JSON body; the client's retry config retries a cold model."""
    response = runtime.invoke_model(
        modelId=model_arn, body=json.dumps(body), contentType="application/json", accept="application/json"
    )
    return dict(json.loads(response["body"].read()))


def reply_text(response: dict[str, Any]) -> str:
    """The assistant message of a chat-completions response."""
    return str(response["choices"][0]["message"]["content"])


def main(argv: Sequence[str] | None = None, *, runtime: Any = None, cloudformation: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--model-arn", help="ARN of the imported model")
    target.add_argument("--stack", help="Bedrock import stack name, e.g. MangaAssist-prod-BedrockImport")
    parser.add_argument("--model", help="configured model name (bedrock.models[].name), with --stack")
    parser.add_argument("--region", help="AWS region (default: the SDK's)")
    parser.add_argument("--system", help="system message")
    parser.add_argument("--max-tokens", type=int_in(1), default=256)
    parser.add_argument("--temperature", type=non_negative_float, default=0.2)
    parser.add_argument(
        "--attempts",
        type=int_in(1),
        default=DEFAULT_ATTEMPTS,
        help=f"InvokeModel tries in all, botocore's standard retry mode (default {DEFAULT_ATTEMPTS}: about a minute)",
    )
    parser.add_argument("--raw", action="store_true", help="print the whole JSON response")
    parser.add_argument("prompt", help="user message")
    args = parser.parse_args(argv)
    if args.stack and not args.model:
        parser.error("--stack needs --model")

    if args.model_arn:
        model_arn = args.model_arn
    else:
        cloudformation = cloudformation or boto3.client("cloudformation", region_name=args.region)
        model_arn = model_arn_from_stack(cloudformation, args.stack, args.model)
    runtime = runtime or boto3.client("bedrock-runtime", region_name=args.region, config=retry_config(args.attempts))
    body = chat_body(args.prompt, system=args.system, max_tokens=args.max_tokens, temperature=args.temperature)
    try:
        response = invoke(runtime, model_arn, body)
    except (ClientError, BotoCoreError) as error:
        print(f"error: InvokeModel on {model_arn} failed: {error}", file=sys.stderr)
        return 1
    print(json.dumps(response, indent=2) if args.raw else reply_text(response))
    return 0


if __name__ == "__main__":
    sys.exit(main())
