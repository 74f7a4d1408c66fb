/**
 * The analytics event names of the spec ("Analytics event names") written out as data, the
 * world-setting categories they belong to, and the properties dropped for worlds that opted out of
 * user-level activity.
 *
 * The list is informative, not closed: names outside it are accepted everywhere (the spec says new
 * names can appear at any time, without a new `apiVersion`), so nothing here refuses a name.
 */
import { ANALYTICS_CATEGORIES, type AnalyticsCategory } from "../admin.schema.js";

/**
 * Every family of the spec's table with its suffixes; a full name is `<family>.<suffix>`.
 *
 * The media entry `<media_server>_switch.requested` is not a literal suffix (the spec replaced a
 * product name by a placeholder), so it is not listed here but matched by
 * {@link MEDIA_SERVER_SWITCH_REQUESTED_PATTERN}.
 */
export const ANALYTICS_EVENT_FAMILIES = {
  area: ["dwell"],
  asset: ["error"],
  auth: ["logged_sso", "logged_token", "login_clicked", "logout_clicked", "user_identified"],
  bubble: ["lock.toggled", "say.opened", "think.opened"],
  chat: [
    "matrix_encryption_configuration.started",
    "matrix_folder.created",
    "matrix_room.created",
    "message_from_user_list_clicked",
    "message_list_opened",
    "message_sent",
    "opened",
  ],
  conversation: ["participant_added"],
  cowebsite: ["closed", "fullscreen_opened", "link_copied", "opened", "opened_in_new_tab", "switched"],
  custom_button: ["clicked"],
  emote: ["edit_opened", "launched"],
  external_module: ["calendar_opened", "chat_band.clicked", "opened", "todo_list_opened"],
  feedback: ["opened", "submitted"],
  file: ["drag_dropped"],
  global_audio: ["opened"],
  global_message: ["opened", "sound_sent", "text_sent"],
  invite: ["accepted", "opened", "sent", "walk_link_option_changed"],
  map_editor: [
    "application.opened",
    "application_picker.opened",
    "area.created",
    "area.lock.toggled",
    "area.removed",
    "area.updated",
    "closed",
    "entity.added",
    "entity.removed",
    "entity.updated",
    "opened",
    "property.added",
    "property.clicked",
    "property.removed",
    "save.failed",
    "tool.opened",
  ],
  map_explorer: [
    "center_to_user_clicked",
    "closed",
    "filtered",
    "opened",
    "top_button_clicked",
    "zoom_in_clicked",
    "zoom_out_clicked",
  ],
  map_loading: ["failed", "started", "succeeded"],
  media: [
    "background_effect.sample",
    "camera.toggled",
    "codec.degraded",
    "connection_retry",
    "device_error",
    "microphone.dwell",
    "microphone.toggled",
    "permission_denied",
    "speech.dwell",
    "turn_test.failed",
    "turn_test.succeeded",
    "turn_test.timeout",
    "video_quality.sample",
    "video_stream_missing",
  ],
  meeting: [
    "actions.opened",
    "area_entered",
    "camera_layout_resized",
    "ended",
    "floor.given",
    "floor.given_back",
    "floor.revoked",
    "hand.lowered_for_participant",
    "hand.toggled",
    "layout_changed",
    "microphone.muted",
    "microphone.muted_for_everybody",
    "participant.kicked",
    "participant.pinned",
    "participation.ended",
    "picture_in_picture.toggled",
    "private_message.clicked",
    "report.clicked",
    "screenshare.ended",
    "screenshare.toggled",
    "started",
    "video.muted",
    "video.muted_for_everybody",
  ],
  megaphone: ["opened"],
  menu: ["chat.opened", "contact.opened", "credit.opened", "custom.opened", "opened", "shortcuts.opened"],
  onboarding: [
    "companion_selected",
    "custom_woka_selected",
    "name_validated",
    "video_validated",
    "woka_selected",
    "woka_validated",
  ],
  personal_desk: ["entered", "unclaimed"],
  popup: ["opened"],
  profile: ["camera_edit_opened", "companion_edit_opened", "name_edit_opened", "opened", "woka_edit_opened"],
  pwa: [
    "continue_in_browser_clicked",
    "install_clicked",
    "install_from_profile_menu_clicked",
    "install_outcome",
    "install_prompt_shown",
  ],
  recording: ["list_opened", "started", "stopped"],
  room: ["changed", "visited"],
  room_list: ["opened", "room_clicked"],
  scripting: ["website_opened"],
  session: ["ended", "started"],
  settings: [
    "ask_website.changed",
    "audio_volume.opened",
    "background.changed",
    "background.opened",
    "camera.changed",
    "camera.selected",
    "decrease_audio_volume.changed",
    "fullscreen.changed",
    "microphone.changed",
    "microphone.selected",
    "notification.changed",
    "opened",
    "picture_in_picture.changed",
    "request_follow.changed",
    "speaker.selected",
  ],
  status: ["dwell"],
  user: [
    "business_card.opened",
    "connected",
    "disconnected",
    "follow_requested",
    "go_to_clicked",
    "report.clicked",
    "woka_menu.opened",
  ],
  user_list: ["opened"],
  websocket: ["connection_lost", "reconnected", "reconnecting"],
  world: ["entered"],
} as const satisfies Record<string, readonly string[]>;

/** A family of {@link ANALYTICS_EVENT_FAMILIES} (the part of a name before its first dot). */
export type AnalyticsEventFamily = keyof typeof ANALYTICS_EVENT_FAMILIES;

type FullNames<F extends AnalyticsEventFamily> = F extends AnalyticsEventFamily
  ? `${F}.${(typeof ANALYTICS_EVENT_FAMILIES)[F][number]}`
  : never;

/** A literal name of the spec's table (the media `<media_server>_switch.requested` names excluded). */
export type ListedAnalyticsEventName = FullNames<AnalyticsEventFamily>;

/** Every family, in the table's (alphabetical) order. */
export const ANALYTICS_EVENT_FAMILY_NAMES: readonly AnalyticsEventFamily[] = Object.freeze(
  Object.keys(ANALYTICS_EVENT_FAMILIES) as AnalyticsEventFamily[],
);

/** Every literal full name of the table, `<family>.<suffix>`, in table order. */
export const LISTED_ANALYTICS_EVENT_NAMES: readonly ListedAnalyticsEventName[] = Object.freeze(
  ANALYTICS_EVENT_FAMILY_NAMES.flatMap((family) =>
    ANALYTICS_EVENT_FAMILIES[family].map((suffix) => `${family}.${suffix}` as ListedAnalyticsEventName),
  ),
);

/**
 * Matches the media `<media_server>_switch.requested` names: the spec hides the media server's
 * product name, so any lower-case identifier is accepted in its place.
 */
export const MEDIA_SERVER_SWITCH_REQUESTED_PATTERN = "^media\\.[a-z0-9_]+_switch\\.requested$";

const mediaSwitchRequested = new RegExp(MEDIA_SERVER_SWITCH_REQUESTED_PATTERN);
const listedNames: ReadonlySet<string> = new Set(LISTED_ANALYTICS_EVENT_NAMES);

/** Whether `eventName` is one of the spec's table (a literal name or a media switch request). */
export function isListedAnalyticsEventName(eventName: string): boolean {
  return listedNames.has(eventName) || mediaSwitchRequested.test(eventName);
}

/** The family of an event name: the text before its first dot (the whole name when it has none). */
export function analyticsFamilyOf(eventName: string): string {
  const dot = eventName.indexOf(".");
  return dot === -1 ? eventName : eventName.slice(0, dot);
}

// Presence claims two single names of the `user` family; the rest of that family are clicks and
// menus, which the spec's "and others" puts with the workspace actions.
const PRESENCE_NAMES = ["user.connected", "user.disconnected"] as const;
const PRESENCE_FAMILIES = ["session", "status"] as const satisfies readonly AnalyticsEventFamily[];
const COLLABORATION_FAMILIES = [
  "bubble",
  "chat",
  "conversation",
  "meeting",
  "megaphone",
  "global_message",
  "global_audio",
] as const satisfies readonly AnalyticsEventFamily[];
const QUALITY_FAMILIES = ["media", "websocket", "asset", "map_loading"] as const satisfies readonly AnalyticsEventFamily[];
const NOT_WORKSPACE: ReadonlySet<string> = new Set<string>([...PRESENCE_FAMILIES, ...COLLABORATION_FAMILIES, ...QUALITY_FAMILIES]);

/**
 * What each analytics category of the world settings covers, in the spec's notation: `family.*`
 * for a whole family, a full name for a single event.
 *
 * Choice: the spec ends the workspace-actions list with "and others". Here every listed family that
 * no other category names is a workspace action (auth, onboarding, settings, pwa, world, …), and so
 * are the `user.*` names other than `user.connected` and `user.disconnected`. A single name wins
 * over its family: `user.connected` is presence even though `user.*` is a workspace action.
 *
 * (Named `ANALYTICS_CATEGORY_FAMILIES` because `ANALYTICS_CATEGORIES`, the list of category keys,
 * is already exported by the admin contracts.)
 */
export const ANALYTICS_CATEGORY_FAMILIES: Readonly<Record<AnalyticsCategory, readonly string[]>> = Object.freeze({
  presenceAndSessions: Object.freeze([...PRESENCE_NAMES, ...PRESENCE_FAMILIES.map((f) => `${f}.*`)]),
  collaboration: Object.freeze(COLLABORATION_FAMILIES.map((f) => `${f}.*`)),
  workspaceActions: Object.freeze(
    ANALYTICS_EVENT_FAMILY_NAMES.filter((f) => !NOT_WORKSPACE.has(f)).map((f) => `${f}.*`),
  ),
  qualityDiagnostics: Object.freeze(QUALITY_FAMILIES.map((f) => `${f}.*`)),
});

const categoryOfName = new Map<string, AnalyticsCategory>();
const categoryOfFamily = new Map<string, AnalyticsCategory>();
for (const category of ANALYTICS_CATEGORIES) {
  for (const entry of ANALYTICS_CATEGORY_FAMILIES[category]) {
    if (entry.endsWith(".*")) categoryOfFamily.set(entry.slice(0, -2), category);
    else categoryOfName.set(entry, category);
  }
}

/**
 * The world-setting category that governs an analytics event (see
 * {@link ANALYTICS_CATEGORY_FAMILIES}): its own name first, then its family.
 *
 * Unknown names and families fall in `workspaceActions`, the spec's "and others" category, so a
 * new event name is still switched off by a world that disabled workspace actions. The result is
 * `null` only for a name that is not an event name at all (empty, or starting with a dot).
 */
export function analyticsCategoryOf(eventName: string): AnalyticsCategory | null {
  const family = analyticsFamilyOf(eventName);
  if (family === "") return null;
  return categoryOfName.get(eventName) ?? categoryOfFamily.get(family) ?? "workspaceActions";
}

/**
 * Properties removed at ingestion from the events of worlds that opted out of user-level activity
 * (the spec names `fileName`, the document name of `cowebsite.closed`, as one of them).
 */
export const USER_LEVEL_STRIPPED_PROPERTIES = Object.freeze(["fileName"] as const);
