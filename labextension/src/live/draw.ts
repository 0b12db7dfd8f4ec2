// Plain canvas drawing for the live panes: a canvas sized to its box at the screen's pixel
// ratio, the function colours, and a small history line chart.

/** Tableau 10: distinct on light and dark themes alike. */
const PALETTE = [
  '#4e79a7',
  '#f28e2b',
  '#59a14f',
  '#b07aa1',
  '#76b7b2',
  '#edc948',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
  '#86bcb6'
];

export const FAILED_COLOUR = '#e15759';

/** Colours by first appearance, so the first ten functions never share one. */
export class Colours {
  get(name: string): string {
    let colour = this._byName.get(name);
    if (!colour) {
      if (this._byName.size >= 200) {
        this._byName.clear(); // bounded: a run with endless function names
      }
      colour = PALETTE[this._byName.size % PALETTE.length];
      this._byName.set(name, colour);
    }
    return colour;
  }

  private _byName = new Map<string, string>();
}

/** Size the canvas's backing store to its CSS box times the pixel ratio; returns the 2D
 * context in CSS pixels, or null while the canvas is not laid out. */
export function prepare(
  canvas: HTMLCanvasElement,
  cssHeight: number
): { ctx: CanvasRenderingContext2D; width: number; height: number } | null {
  const width = canvas.clientWidth;
  if (width <= 0) {
    return null;
  }
  const ratio = window.devicePixelRatio || 1;
  canvas.style.height = `${cssHeight}px`;
  const w = Math.round(width * ratio);
  const h = Math.round(cssHeight * ratio);
  if (canvas.width !== w || canvas.height !== h) {
    canvas.width = w;
    canvas.height = h;
  }
  const ctx = canvas.getContext('2d');
  if (!ctx) {
    return null;
  }
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, cssHeight);
  return { ctx, width, height: cssHeight };
}

/** A CSS variable of the current theme (falls back where a theme lacks it). */
export function themeColour(name: string, fallback: string): string {
  const value = getComputedStyle(document.body).getPropertyValue(name).trim();
  return value || fallback;
}

export interface ISeries {
  colour: string;
  /** Fractions 0..1, oldest first. */
  values: readonly number[];
}

/** Lines of fractions over the last `capacity` samples, newest at the right edge. */
export function drawHistory(
  canvas: HTMLCanvasElement,
  series: readonly ISeries[],
  capacity: number,
  height = 32
): void {
  const box = prepare(canvas, height);
  if (!box) {
    return;
  }
  const { ctx, width } = box;
  ctx.strokeStyle = themeColour('--jp-border-color2', '#e0e0e0');
  ctx.lineWidth = 1;
  ctx.strokeRect(0.5, 0.5, width - 1, height - 1);
  const step = width / Math.max(1, capacity - 1);
  for (const { colour, values } of series) {
    if (values.length < 1) {
      continue;
    }
    ctx.strokeStyle = colour;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    const offset = capacity - values.length;
    values.forEach((v, i) => {
      const x = (offset + i) * step;
      const y = height - 2 - Math.max(0, Math.min(1, v)) * (height - 4);
      if (i === 0) {
        ctx.moveTo(x, y);
      } else {
        ctx.lineTo(x, y);
      }
    });
    ctx.stroke();
  }
}

/** Append to a bounded history: the oldest sample goes once `capacity` is reached. */
export function pushBounded<T>(values: T[], value: T, capacity: number): void {
  values.push(value);
  if (values.length > capacity) {
    values.splice(0, values.length - capacity);
  }
}

/** 0.42 s, 3.1 s, 2 min 5 s. */
export function formatDuration(seconds: number): string {
  if (seconds < 1) {
    return `${Math.round(seconds * 1000)} ms`;
  }
  if (seconds < 60) {
    return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  }
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}
