/**
 * Attempts per hour over the last 24 h, delivered against failed, stacked: an SVG drawn by the
 * page (no chart library, nothing fetched; only attributes and classes, so the strict CSP holds),
 * sized in the container's own pixels so its text stays legible at 360 px, with the same figures
 * as a table for screen readers (the drawing itself is hidden from them).
 */
import { useEffect, useId, useRef, useState, type RefObject } from "react";

/** One clock hour of the stats' `attemptsByHour`. */
export interface HourlyAttempts {
  hour: string;
  succeeded: number;
  failed: number;
}

const HEIGHT = 190;
const MARGIN = { top: 10, right: 8, bottom: 26, left: 40 };

/** The smallest 1, 2 or 5 times a power of ten at or above `n` (the axis' top), at least 1. */
export function niceCeiling(n: number): number {
  if (n <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= n)!;
}

const hourLabel = new Intl.DateTimeFormat(undefined, { hour: "numeric" });
const hourWithDay = new Intl.DateTimeFormat(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit" });
const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

/** The width of `ref`'s element in CSS pixels, following resizes. */
function useWidth(ref: RefObject<HTMLElement | null>, initial: number): number {
  const [width, setWidth] = useState(initial);
  useEffect(() => {
    const element = ref.current;
    if (!element) return undefined;
    const observer = new ResizeObserver(([entry]) => {
      if (entry) setWidth(Math.max(200, Math.floor(entry.contentRect.width)));
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, [ref]);
  return width;
}

export function AttemptsChart({ hours, title }: { hours: readonly HourlyAttempts[]; title: string }) {
  const id = useId();
  const box = useRef<HTMLDivElement>(null);
  const width = useWidth(box, 640);
  const total = hours.reduce((n, h) => n + h.succeeded + h.failed, 0);
  const top = niceCeiling(Math.max(0, ...hours.map((h) => h.succeeded + h.failed)));
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const slot = plotW / Math.max(1, hours.length);
  const barW = Math.max(2, Math.min(24, slot * 0.72));
  const y = (v: number) => MARGIN.top + plotH - (v / top) * plotH;
  // Hour labels every 3 h when there is room, every 6 h on a phone.
  const labelEvery = plotW / hours.length >= 22 ? 3 : 6;
  // Whole numbers only (a half attempt means nothing); an empty chart keeps only its baseline.
  const ticks = total === 0 ? [0] : [0, top / 2, top].filter((v, i, a) => a.indexOf(v) === i && Number.isInteger(v));

  return (
    <figure className="chart" aria-labelledby={`${id}-title`} data-testid="attempts-chart">
      <figcaption id={`${id}-title`} className="chart-title">
        {title}
      </figcaption>
      <ul className="chart-legend" aria-hidden="true">
        <li>
          <span className="swatch swatch-ok" /> delivered (2xx)
        </li>
        <li>
          <span className="swatch swatch-bad" /> failed (retried or not)
        </li>
      </ul>
      <div ref={box} className="chart-box">
        <svg width={width} height={HEIGHT} viewBox={`0 0 ${width} ${HEIGHT}`} aria-hidden="true" focusable="false" className="chart-svg">
          {ticks.map((v) => (
            <g key={v}>
              <line className="chart-grid" x1={MARGIN.left} x2={width - MARGIN.right} y1={y(v)} y2={y(v)} />
              <text className="chart-axis" x={MARGIN.left - 6} y={y(v)} dy="0.32em" textAnchor="end">
                {compact.format(v)}
              </text>
            </g>
          ))}
          {hours.map((h, i) => {
            const x = MARGIN.left + i * slot + (slot - barW) / 2;
            const at = new Date(h.hour);
            return (
              <g key={h.hour} data-hour={h.hour}>
                <title>{`${hourWithDay.format(at)}: ${h.succeeded} delivered, ${h.failed} failed`}</title>
                {h.succeeded > 0 ? <rect className="bar-ok" x={x} width={barW} y={y(h.succeeded)} height={y(0) - y(h.succeeded)} /> : null}
                {h.failed > 0 ? <rect className="bar-bad" x={x} width={barW} y={y(h.succeeded + h.failed)} height={y(h.succeeded) - y(h.succeeded + h.failed)} /> : null}
                {at.getHours() % labelEvery === 0 ? (
                  <text className="chart-axis" x={x + barW / 2} y={HEIGHT - 8} textAnchor="middle">
                    {hourLabel.format(at)}
                  </text>
                ) : null}
              </g>
            );
          })}
          <line className="chart-baseline" x1={MARGIN.left} x2={width - MARGIN.right} y1={y(0)} y2={y(0)} />
          {total === 0 ? (
            <text className="chart-empty" x={MARGIN.left + plotW / 2} y={MARGIN.top + plotH / 2} textAnchor="middle">
              No attempts in the last 24 hours
            </text>
          ) : null}
        </svg>
      </div>
      {total === 0 ? (
        <p className="visually-hidden">No attempts in the last 24 hours.</p>
      ) : (
        // The wrapper hides it: a table itself never shrinks below its content's width.
        <div className="visually-hidden">
          <table data-testid="attempts-table">
            <caption>{title}</caption>
            <thead>
              <tr>
                <th scope="col">Hour starting</th>
                <th scope="col">Attempts delivered</th>
                <th scope="col">Attempts failed</th>
              </tr>
            </thead>
            <tbody>
              {hours.map((h) => (
                <tr key={h.hour}>
                  <th scope="row">{hourWithDay.format(new Date(h.hour))}</th>
                  <td>{h.succeeded}</td>
                  <td>{h.failed}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </figure>
  );
}
