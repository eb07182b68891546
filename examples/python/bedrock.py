"""Claude on Amazon Bedrock with the raw client: a Messages API request in, a Message out, signed with your
AWS credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or a profile in
~/.aws/credentials chosen by AWS_PROFILE).

    AWS_REGION=us-west-2 python examples/python/bedrock.py "Name three rivers in France."

The model is a Bedrock model id or an inference profile id (BEDROCK_MODEL overrides the default below).
"""

from __future__ import annotations

import os
import sys

import tooloop


def main() -> int:
    prompt = " ".join(sys.argv[1:]) or "Name three rivers in France."
    model = os.environ.get("BEDROCK_MODEL", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    client = tooloop.Client(provider="bedrock", region=os.environ.get("AWS_REGION", "us-west-2"))
    request = {"model": model, "max_tokens": 512, "messages": [{"role": "user", "content": prompt}]}
    try:
        with client.stream(request) as stream:
            for event in stream:
                delta = event.get("delta") or {}
                if event.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                    print(delta["text"], end="", flush=True)
            message = stream.final_message()
    except tooloop.Error as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    print(f"\n[{message['stop_reason']}; {message['usage']['output_tokens']} output tokens]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
