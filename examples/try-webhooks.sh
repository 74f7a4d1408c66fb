#!/bin/sh
# Webhooks end to end against `npm run dev`: an endpoint, a receiver that verifies signatures, an
# event. In dev any URL is accepted (ENDPOINT_URL_POLICY=any), so a receiver on 127.0.0.1 works;
# production accepts only public HTTPS URLs. The defaults are what `npm run dev` prints.
set -eu
ADMIN=${ADMIN:-http://localhost:3003}
INGEST=${INGEST:-http://localhost:3002}
ADMIN_TOKEN=${ADMIN_TOKEN:-dev-admin-token-change-me-2f8c1e6a9b7d4053}
INGEST_TOKEN=${INGEST_TOKEN:-dev-ingest-token-change-me-7a3e9c1f5b2d8640}
RECEIVER_PORT=${RECEIVER_PORT:-4000}
uuid() { node -p 'crypto.randomUUID()'; }

# 1. An endpoint of the demo world for visitor events. Its secret is in this answer only.
SECRET=$(curl -sSf -X POST "$ADMIN/admin/v1/worlds/demo/lobby/endpoints" \
  -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
  -d "{\"url\":\"http://127.0.0.1:$RECEIVER_PORT/webhooks\",\"subscriptions\":[\"visitor\"]}" \
  | node -pe 'JSON.parse(require("fs").readFileSync(0, "utf8")).secret')

# 2. The receiver (examples/webhook-receiver.mjs), verifying with the standardwebhooks library.
WEBHOOK_SECRET=$SECRET RECEIVER_PORT=$RECEIVER_PORT node examples/webhook-receiver.mjs &
until curl -s -o /dev/null "http://127.0.0.1:$RECEIVER_PORT/"; do sleep 0.2; done

# 3. An event as the platform sends it: the worker signs it and POSTs it to the receiver.
curl -sSf -X POST "$INGEST/v1/events" -H "Authorization: Bearer $INGEST_TOKEN" \
  -H 'Content-Type: application/json' \
  -d "{\"id\":\"$(uuid)\",\"world\":\"demo/lobby\",\"type\":\"visitor.registered\",
       \"timestamp\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",
       \"data\":{\"uuid\":\"$(uuid)\",\"name\":\"Ada\",\"email\":\"ada@example.com\",\"via\":\"email\"}}"
echo
wait # the receiver prints "verified visitor.registered <deliveryId>"; Ctrl+C stops it
