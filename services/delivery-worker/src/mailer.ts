/**
 * The mail telling a world's administrators that one of its webhook endpoints was disabled, sent
 * over SMTP (`SMTP_URL`, `MAIL_FROM`). Without `SMTP_URL` the mail is logged instead (the worker
 * warns about it at start-up): a missing relay must not stop deliveries.
 */
import nodemailer, { type Transporter } from "nodemailer";
import type { SqlRunner } from "@vw/db";
import type { EndpointDisabledMailData } from "@vw/queues";
import type { Logger } from "@vw/service-kit";

/** Sends a composed mail; nodemailer in production, anything in tests. */
export interface MailTransport {
  send(mail: { from: string; to: string[]; subject: string; text: string }): Promise<void>;
}

/** An SMTP transport from `SMTP_URL` (`smtp://user:pass@host:587`, `smtps://...`). */
export function smtpTransport(smtpUrl: string): MailTransport & { close(): void } {
  const transporter: Transporter = nodemailer.createTransport(smtpUrl);
  return {
    async send(mail) {
      await transporter.sendMail(mail);
    },
    close: () => transporter.close(),
  };
}

/** What the mail says, from the job payload and the endpoint's world. */
export function composeEndpointDisabledMail(
  data: EndpointDisabledMailData,
  context: { url: string; organizationSlug: string; worldSlug: string; worldName: string },
): { subject: string; text: string } {
  const why =
    data.reason === "gone"
      ? "the receiver answered 410 Gone, which means it wants no more deliveries"
      : `${data.consecutiveFailures} delivery attempts in a row failed`;
  const last = [data.status !== null ? `HTTP ${data.status}` : null, data.error].filter((part) => part !== null).join(", ");
  const subject = `Webhook endpoint disabled in ${context.worldName}`;
  const text = [
    `The webhook endpoint ${context.url} of the world "${context.worldName}" (${context.organizationSlug}/${context.worldSlug}) was disabled at ${data.disabledAt}.`,
    "",
    `Why: ${why}.`,
    `Last attempt: delivery ${data.deliveryId}${last ? ` (${last})` : ""}.`,
    "",
    "While it is disabled the endpoint receives nothing, and events of this period will not be sent later.",
    `Once the receiver is fixed, re-enable it: POST /admin/v1/worlds/${context.organizationSlug}/${context.worldSlug}/endpoints/${data.endpointId}/enable`,
    "",
    "You receive this mail as an administrator of the world.",
  ].join("\n");
  return { subject, text };
}

/** $1 endpoint id: its url, and its world's administrators, slugs and name. */
const MAIL_TARGET = {
  name: "mail-endpoint-target",
  text: `SELECT e.url, w.id AS "worldId", w.admin_emails AS "adminEmails", w.slug AS "worldSlug", w.name AS "worldName", o.slug AS "organizationSlug"
    FROM webhook_endpoints e JOIN worlds w ON w.id = e.world_id JOIN organizations o ON o.id = w.organization_id WHERE e.id = $1::uuid`,
};

/** Sends the endpoint-disabled mail of a job. */
export class EndpointDisabledMailer {
  constructor(
    private readonly sql: SqlRunner,
    private readonly transport: MailTransport | null,
    private readonly from: string,
    private readonly logger: Logger,
  ) {}

  /** Returns the recipients the mail went to (empty when there is nobody or the endpoint is gone). */
  async send(data: EndpointDisabledMailData): Promise<string[]> {
    const [endpoint] = await this.sql.query<{ url: string; worldId: string; adminEmails: string[]; worldSlug: string; worldName: string; organizationSlug: string }>(MAIL_TARGET, [data.endpointId]);
    if (endpoint === undefined) {
      this.logger.info({ endpointId: data.endpointId }, "endpoint deleted before its disable mail was sent; nothing to say");
      return [];
    }
    const to = endpoint.adminEmails;
    if (to.length === 0) {
      this.logger.warn({ endpointId: data.endpointId, worldId: endpoint.worldId }, "endpoint disabled, but its world has no administrator e-mail");
      return [];
    }
    const mail = composeEndpointDisabledMail(data, {
      url: endpoint.url,
      organizationSlug: endpoint.organizationSlug,
      worldSlug: endpoint.worldSlug,
      worldName: endpoint.worldName,
    });
    if (this.transport === null) {
      this.logger.warn({ to, subject: mail.subject, endpointId: data.endpointId }, "SMTP_URL is not set: endpoint-disabled mail NOT sent");
      return [];
    }
    await this.transport.send({ from: this.from, to, ...mail });
    return to;
  }
}
