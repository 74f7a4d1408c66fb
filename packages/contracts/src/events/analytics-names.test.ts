import { describe, expect, it } from "@jest/globals";
import { ANALYTICS_CATEGORIES } from "../admin.schema.js";
import {
  ANALYTICS_CATEGORY_FAMILIES,
  ANALYTICS_EVENT_FAMILIES,
  LISTED_ANALYTICS_EVENT_NAMES,
  USER_LEVEL_STRIPPED_PROPERTIES,
  analyticsCategoryOf,
  analyticsFamilyOf,
  isListedAnalyticsEventName,
} from "./analytics-names.js";

describe("ANALYTICS_EVENT_FAMILIES", () => {
  it("holds the 38 families of the spec's table and their 169 literal names", () => {
    expect(Object.keys(ANALYTICS_EVENT_FAMILIES)).toHaveLength(38);
    expect(LISTED_ANALYTICS_EVENT_NAMES).toHaveLength(169);
    expect(new Set(LISTED_ANALYTICS_EVENT_NAMES).size).toBe(LISTED_ANALYTICS_EVENT_NAMES.length);
  });

  it("spells full names as <family>.<suffix>, with the tabulated ones present", () => {
    for (const name of ["area.dwell", "asset.error", "auth.user_identified", "chat.message_sent", "cowebsite.closed", "cowebsite.opened", "user.disconnected"]) {
      expect(LISTED_ANALYTICS_EVENT_NAMES).toContain(name);
    }
    expect(LISTED_ANALYTICS_EVENT_NAMES).toContain("map_editor.area.lock.toggled");
    expect(LISTED_ANALYTICS_EVENT_NAMES).toContain("meeting.video.muted_for_everybody");
  });

  it("matches the media <media_server>_switch.requested names by pattern, not by a placeholder suffix", () => {
    expect(LISTED_ANALYTICS_EVENT_NAMES.some((n) => n.includes("<"))).toBe(false);
    expect(isListedAnalyticsEventName("media.livekit_switch.requested")).toBe(true);
    expect(isListedAnalyticsEventName("media.switch.requested")).toBe(false);
    expect(isListedAnalyticsEventName("chat.livekit_switch.requested")).toBe(false);
    expect(isListedAnalyticsEventName("area.dwell")).toBe(true);
    expect(isListedAnalyticsEventName("area.entered")).toBe(false);
  });
});

describe("analyticsFamilyOf", () => {
  it("is the text before the first dot", () => {
    expect(analyticsFamilyOf("map_editor.area.created")).toBe("map_editor");
    expect(analyticsFamilyOf("user_list.opened")).toBe("user_list");
    expect(analyticsFamilyOf("nodots")).toBe("nodots");
  });
});

describe("analyticsCategoryOf", () => {
  it.each([
    ["user.connected", "presenceAndSessions"],
    ["user.disconnected", "presenceAndSessions"],
    ["session.started", "presenceAndSessions"],
    ["status.dwell", "presenceAndSessions"],
    ["bubble.lock.toggled", "collaboration"],
    ["chat.message_sent", "collaboration"],
    ["conversation.participant_added", "collaboration"],
    ["meeting.hand.toggled", "collaboration"],
    ["megaphone.opened", "collaboration"],
    ["global_message.text_sent", "collaboration"],
    ["global_audio.opened", "collaboration"],
    ["media.video_quality.sample", "qualityDiagnostics"],
    ["media.livekit_switch.requested", "qualityDiagnostics"],
    ["websocket.reconnecting", "qualityDiagnostics"],
    ["asset.error", "qualityDiagnostics"],
    ["map_loading.failed", "qualityDiagnostics"],
    ["area.dwell", "workspaceActions"],
    ["cowebsite.closed", "workspaceActions"],
    ["map_editor.entity.added", "workspaceActions"],
    ["menu.opened", "workspaceActions"],
    ["room.visited", "workspaceActions"],
    ["invite.sent", "workspaceActions"],
    ["file.drag_dropped", "workspaceActions"],
    ["emote.launched", "workspaceActions"],
    ["popup.opened", "workspaceActions"],
    // "and others": listed families no other category names
    ["auth.logged_sso", "workspaceActions"],
    ["settings.opened", "workspaceActions"],
    ["user.follow_requested", "workspaceActions"],
    ["user_list.opened", "workspaceActions"],
    // names and families the spec does not list
    ["hologram.projected", "workspaceActions"],
    ["session.paused", "presenceAndSessions"],
    ["media.new_metric", "qualityDiagnostics"],
  ] as const)("%s -> %s", (name, category) => {
    expect(analyticsCategoryOf(name)).toBe(category);
  });

  it("is null for a string that is not an event name", () => {
    expect(analyticsCategoryOf("")).toBeNull();
    expect(analyticsCategoryOf(".dwell")).toBeNull();
  });

  it("places every listed name in exactly the category its entries give", () => {
    for (const name of LISTED_ANALYTICS_EVENT_NAMES) {
      const matches = ANALYTICS_CATEGORIES.filter((c) =>
        ANALYTICS_CATEGORY_FAMILIES[c].some((entry) => entry === name || (entry.endsWith(".*") && name.startsWith(entry.slice(0, -1)))),
      );
      const category = analyticsCategoryOf(name);
      // user.connected/user.disconnected also match `user.*`: the single name wins.
      if (name === "user.connected" || name === "user.disconnected") expect(matches).toEqual(["presenceAndSessions", "workspaceActions"]);
      else expect(matches).toEqual([category]);
    }
  });

  it("lists every family in some category and no family in two", () => {
    const families = ANALYTICS_CATEGORIES.flatMap((c) => ANALYTICS_CATEGORY_FAMILIES[c].filter((e) => e.endsWith(".*")));
    expect(new Set(families).size).toBe(families.length);
    expect(new Set(families)).toEqual(new Set(Object.keys(ANALYTICS_EVENT_FAMILIES).map((f) => `${f}.*`)));
  });
});

describe("USER_LEVEL_STRIPPED_PROPERTIES", () => {
  it("names fileName", () => {
    expect(USER_LEVEL_STRIPPED_PROPERTIES).toEqual(["fileName"]);
  });
});
