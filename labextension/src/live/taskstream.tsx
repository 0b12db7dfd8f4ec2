// The task stream: one lane per worker, a bar per task coloured by function, scrolling live
// over the last minutes; failed tasks outlined in red; hover for function, duration, node.
import * as React from 'react';

import { ClusterStore } from '../model';
import { ILiveTask, ITasksReply } from './api';
import {
  Colours,
  FAILED_COLOUR,
  formatDuration,
  prepare,
  themeColour
} from './draw';
import { LiveSource } from './source';

/** Seconds of tasks kept, and the most tasks kept: the browser's memory stays bounded. */
export const WINDOW_S = 300;
export const MAX_TASKS = 20000;
const SPANS: [number, string][] = [
  [30, '30 s'],
  [60, '1 min'],
  [WINDOW_S, '5 min']
];

const LANE_H = 16;
const AXIS_H = 18;
const LABEL_W = 150;

/** The node's address, else the start of its id. */
export function nodeName(task: {
  node: string | null;
  node_id?: string;
}): string {
  return task.node || (task.node_id ?? '').slice(0, 8) || '?';
}

export interface ILane {
  key: string;
  label: string;
  tasks: ILiveTask[];
}

export class TaskStreamSource extends LiveSource<ITasksReply> {
  constructor(store: ClusterStore) {
    super(store, 'tasks', 'the task stream', 1000);
  }

  readonly colours = new Colours();

  /** Seconds shown across the pane (at most WINDOW_S). */
  span = 60;

  get tasks(): ReadonlyMap<string, ILiveTask> {
    return this._tasks;
  }

  get truncated(): boolean {
    return this._truncated;
  }

  /** The workers with a task in the kept window, by node, then worker. */
  lanes(): ILane[] {
    const byWorker = new Map<string, ILane>();
    for (const task of this._tasks.values()) {
      const key = task.worker_id || task.node_id;
      let lane = byWorker.get(key);
      if (!lane) {
        lane = {
          key,
          label: `${nodeName(task)} · ${(task.worker_id || '').slice(0, 6)}`,
          tasks: []
        };
        byWorker.set(key, lane);
      }
      lane.tasks.push(task);
    }
    return [...byWorker.values()].sort((a, b) =>
      a.label < b.label ? -1 : a.label > b.label ? 1 : 0
    );
  }

  protected query(): Record<string, string | undefined> {
    return { since: this._cursor };
  }

  protected reset(): void {
    this._tasks.clear();
    this._cursor = undefined;
    this._truncated = false;
  }

  protected ingest(reply: ITasksReply): void {
    this._cursor = reply.cursor;
    this._truncated = !!reply.truncated;
    for (const task of reply.tasks) {
      this._tasks.delete(task.task_id); // re-inserted: the Map's order stays oldest first
      this._tasks.set(task.task_id, task);
    }
    const horizon = reply.now - WINDOW_S;
    for (const [id, task] of this._tasks) {
      if (task.end !== null && task.end < horizon) {
        this._tasks.delete(id);
      }
    }
    const excess = this._tasks.size - MAX_TASKS;
    if (excess > 0) {
      let n = 0;
      for (const id of this._tasks.keys()) {
        if (n++ >= excess) {
          break;
        }
        this._tasks.delete(id);
      }
    }
  }

  protected summary(): string {
    let failed = 0;
    let running = 0;
    const workers = new Set<string>();
    for (const task of this._tasks.values()) {
      failed += task.state === 'FAILED' ? 1 : 0;
      running += task.state === 'RUNNING' ? 1 : 0;
      workers.add(task.worker_id || task.node_id);
    }
    const n = this._tasks.size;
    const parts = [
      `${n.toLocaleString()} ${n === 1 ? 'task' : 'tasks'} on ${workers.size} ${workers.size === 1 ? 'worker' : 'workers'} in the last ${WINDOW_S / 60} min`
    ];
    if (running) {
      parts.push(`${running} running`);
    }
    if (failed) {
      parts.push(`${failed} failed`);
    }
    if (this._truncated) {
      parts.push('more tasks than one reply holds: the latest are shown');
    }
    return parts.join(', ');
  }

  private _cursor: string | undefined = undefined;
  private _tasks = new Map<string, ILiveTask>();
  private _truncated = false;
}

/** The task under (x, y) of the drawn canvas, if any. */
function hit(
  lanes: readonly ILane[],
  x: number,
  y: number,
  width: number,
  now: number,
  span: number
): ILiveTask | null {
  const lane = lanes[Math.floor((y - AXIS_H) / LANE_H)];
  if (!lane || x < LABEL_W) {
    return null;
  }
  const t = now - span + ((x - LABEL_W) / (width - LABEL_W)) * span;
  const slack = (2 / (width - LABEL_W)) * span; // a bar is at least 2 px wide
  for (const task of lane.tasks) {
    const end = task.end ?? now;
    if (task.start - slack <= t && t <= end + slack) {
      return task;
    }
  }
  return null;
}

function draw(
  canvas: HTMLCanvasElement,
  lanes: readonly ILane[],
  source: TaskStreamSource
): void {
  const height = AXIS_H + Math.max(1, lanes.length) * LANE_H + 2;
  const box = prepare(canvas, height);
  if (!box) {
    return;
  }
  const { ctx, width } = box;
  const now = source.serverNow();
  const span = source.span;
  const plot = width - LABEL_W;
  const xOf = (t: number) => LABEL_W + ((t - (now - span)) / span) * plot;
  const text = themeColour('--jp-ui-font-color1', '#333');
  const quiet = themeColour('--jp-ui-font-color2', '#777');
  const grid = themeColour('--jp-border-color2', '#e0e0e0');
  ctx.font = '11px var(--jp-ui-font-family, sans-serif)';
  ctx.textBaseline = 'middle';
  // Axis: a tick every tenth of the span, labelled in seconds ago.
  ctx.fillStyle = quiet;
  ctx.strokeStyle = grid;
  for (let i = 0; i <= 10; i++) {
    const ago = (span * (10 - i)) / 10;
    const x = LABEL_W + (plot * i) / 10;
    ctx.beginPath();
    ctx.moveTo(x + 0.5, AXIS_H - 4);
    ctx.lineTo(x + 0.5, height);
    ctx.stroke();
    if (i % 2 === 0) {
      ctx.textAlign = i === 10 ? 'right' : 'center';
      ctx.fillText(ago === 0 ? 'now' : `-${Math.round(ago)} s`, x, 8);
    }
  }
  ctx.textAlign = 'left';
  lanes.forEach((lane, row) => {
    const y = AXIS_H + row * LANE_H;
    ctx.fillStyle = text;
    ctx.fillText(lane.label, 4, y + LANE_H / 2, LABEL_W - 8);
    for (const task of lane.tasks) {
      const end = task.end ?? now;
      if (end < now - span) {
        continue;
      }
      const x0 = Math.max(LABEL_W, xOf(task.start));
      const w = Math.max(2, xOf(end) - x0);
      ctx.fillStyle = source.colours.get(task.func);
      ctx.fillRect(x0, y + 2, w, LANE_H - 4);
      if (task.state === 'FAILED') {
        ctx.strokeStyle = FAILED_COLOUR;
        ctx.lineWidth = 2;
        ctx.strokeRect(x0 + 1, y + 2, Math.max(1, w - 2), LANE_H - 4);
        ctx.lineWidth = 1;
      }
    }
  });
}

function tooltipText(task: ILiveTask, now: number): string {
  const duration = formatDuration((task.end ?? now) - task.start);
  const lines = [
    task.func + (task.name && task.name !== task.func ? ` (${task.name})` : ''),
    task.state === 'RUNNING'
      ? `running for ${duration}`
      : `${task.state === 'FAILED' ? 'failed after' : 'took'} ${duration}`,
    `node ${nodeName(task)} · worker ${(task.worker_id || '').slice(0, 8)}`
  ];
  if (task.error) {
    lines.push(task.error);
  }
  return lines.join('\n');
}

export function TaskStreamView({
  source
}: {
  source: TaskStreamSource;
}): JSX.Element {
  const canvas = React.useRef<HTMLCanvasElement>(null);
  const tip = React.useRef<HTMLDivElement>(null);
  const lanes = React.useRef<ILane[]>([]);
  const [span, setSpan] = React.useState(source.span);
  lanes.current = source.lanes();

  // Scroll live: redraw every animation frame while the pane is on screen (a hidden tab gets
  // no frames), from the lanes of the last reply.
  React.useEffect(() => {
    let frame = 0;
    const loop = () => {
      if (canvas.current) {
        draw(canvas.current, lanes.current, source);
      }
      frame = requestAnimationFrame(loop);
    };
    frame = requestAnimationFrame(loop);
    return () => cancelAnimationFrame(frame);
  }, [source]);

  const onMove = (event: React.MouseEvent<HTMLCanvasElement>) => {
    const el = canvas.current;
    const box = tip.current;
    if (!el || !box) {
      return;
    }
    const rect = el.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const y = event.clientY - rect.top;
    const now = source.serverNow();
    const task = hit(lanes.current, x, y, rect.width, now, source.span);
    if (!task) {
      box.hidden = true;
      return;
    }
    box.textContent = tooltipText(task, now);
    box.hidden = false;
    box.style.left = `${Math.min(x + 12, rect.width - 240)}px`;
    box.style.top = `${y + 14}px`;
  };

  const functions = new Map<string, number>();
  for (const task of source.tasks.values()) {
    functions.set(task.func, (functions.get(task.func) ?? 0) + 1);
  }
  return (
    <div className="eugo-TaskStream">
      <div className="eugo-Live-toolbar">
        <label>
          Show the last{' '}
          <select
            value={span}
            onChange={e => {
              source.span = Number(e.target.value);
              setSpan(source.span);
            }}
          >
            {SPANS.map(([seconds, label]) => (
              <option key={seconds} value={seconds}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <ul className="eugo-Legend" aria-label="Functions">
          {[...functions.entries()].slice(0, 12).map(([func, count]) => (
            <li key={func} data-func={func}>
              <span
                className="eugo-Legend-swatch"
                style={{ background: source.colours.get(func) }}
              />
              {func} <span className="eugo-Count">{count}</span>
            </li>
          ))}
          <li className="eugo-Legend-failed">
            <span className="eugo-Legend-swatch eugo-mod-failed" /> failed
          </li>
        </ul>
      </div>
      <div className="eugo-TaskStream-plot">
        {lanes.current.length === 0 && (
          <p className="eugo-Empty">
            No task ran in the last {WINDOW_S / 60} minutes.
          </p>
        )}
        <canvas
          ref={canvas}
          className="eugo-TaskStream-canvas"
          aria-label={`Task stream: ${lanes.current.length} workers`}
          data-lanes={lanes.current.length}
          onMouseMove={onMove}
          onMouseLeave={() => {
            if (tip.current) {
              tip.current.hidden = true;
            }
          }}
        />
        <div ref={tip} className="eugo-Tooltip" role="tooltip" hidden />
      </div>
    </div>
  );
}
