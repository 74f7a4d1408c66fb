/** The one-line "how to verify" hint shown with a signing secret. */
export function VerificationHint() {
  return (
    <p className="hint">
      Verify each delivery with any Standard Webhooks library, for example{" "}
      <span className="mono">new Webhook(secret).verify(rawBody, headers)</span> (reads <span className="mono">webhook-id</span>,{" "}
      <span className="mono">webhook-timestamp</span>, <span className="mono">webhook-signature</span>).
    </p>
  );
}
