// GPUs: every GPU of every node, utilization and memory over time, with the tasks holding it.
import * as React from 'react';

import { ClusterStore } from '../model';
import { formatBytes, ResourceBar } from '../panel/resources';
import { IGpusReply, ILiveGpu } from './api';
import { drawHistory, pushBounded } from './draw';
import { LiveSource } from './source';

export const HISTORY = 120;
const UTIL = '#76b900';
const MEMORY = '#4e79a7';

interface IGpuHistory {
  util: number[];
  memory: number[];
}

const gpuKey = (gpu: ILiveGpu) => `${gpu.node_id}:${gpu.index}`;

export class GpusSource extends LiveSource<IGpusReply> {
  constructor(store: ClusterStore) {
    super(store, 'gpus', 'the GPUs', 2000);
  }

  protected showsMessage = true;
  gpus: ILiveGpu[] = [];
  /** Why there is nothing to show ("This cluster has no GPU: ..."), from the server. */
  message: string | null = null;
  readonly history = new Map<string, IGpuHistory>();

  protected reset(): void {
    this.gpus = [];
    this.message = null;
    this.history.clear();
  }

  protected ingest(reply: IGpusReply): void {
    this.gpus = reply.gpus;
    this.message = reply.message ?? null;
    const seen = new Set<string>();
    for (const gpu of reply.gpus) {
      const key = gpuKey(gpu);
      seen.add(key);
      let h = this.history.get(key);
      if (!h) {
        h = { util: [], memory: [] };
        this.history.set(key, h);
      }
      pushBounded(h.util, (gpu.utilization ?? 0) / 100, HISTORY);
      pushBounded(
        h.memory,
        gpu.memory_total > 0 ? gpu.memory_used / gpu.memory_total : 0,
        HISTORY
      );
    }
    for (const key of this.history.keys()) {
      if (!seen.has(key)) {
        this.history.delete(key);
      }
    }
  }

  protected summary(): string {
    const n = this.gpus.length;
    const nodes = new Set(this.gpus.map(g => g.node_id)).size;
    return n
      ? `${n} ${n === 1 ? 'GPU' : 'GPUs'} on ${nodes} ${nodes === 1 ? 'node' : 'nodes'}`
      : 'no GPU';
  }
}

function GpuCard({
  gpu,
  history
}: {
  gpu: ILiveGpu;
  history: IGpuHistory | undefined;
}): JSX.Element {
  const ref = React.useRef<HTMLCanvasElement>(null);
  React.useEffect(() => {
    if (ref.current) {
      drawHistory(
        ref.current,
        [
          { colour: UTIL, values: history?.util ?? [] },
          { colour: MEMORY, values: history?.memory ?? [] }
        ],
        HISTORY,
        48
      );
    }
  });
  const holders = gpu.tasks ?? [];
  return (
    <li
      className="eugo-LiveGpu"
      data-gpu={gpuKey(gpu)}
      aria-label={`GPU ${gpu.index} on ${gpu.node}`}
    >
      <div className="eugo-LiveNode-head">
        <strong>
          {gpu.node} · GPU {gpu.index}
        </strong>
        <span className="eugo-Count">{gpu.name}</span>
      </div>
      <ResourceBar
        label="Util"
        used={gpu.utilization ?? 0}
        total={100}
        format={v => `${Math.round(v)}%`}
      />
      <ResourceBar
        label="Mem"
        used={gpu.memory_used}
        total={gpu.memory_total}
        format={formatBytes}
      />
      <canvas
        ref={ref}
        className="eugo-History eugo-mod-tall"
        aria-label="Utilization (green) and memory (blue) over time"
      />
      <p className="eugo-LiveGpu-tasks">
        {holders.length === 0
          ? 'No task holds it.'
          : `Held by ${holders
              .map(t => t.func ?? `process ${t.pid ?? t.task_id}`)
              .join(', ')}`}
      </p>
    </li>
  );
}

export function GpusView({ source }: { source: GpusSource }): JSX.Element {
  if (!source.gpus.length) {
    return (
      <p className="eugo-Empty eugo-LiveGpu-none" role="note">
        {source.message ?? 'This cluster has no GPU.'}
      </p>
    );
  }
  return (
    <>
      {source.message && <p className="eugo-Empty">{source.message}</p>}
      <ul className="eugo-LiveGpus">
        {source.gpus.map(gpu => (
          <GpuCard
            key={gpuKey(gpu)}
            gpu={gpu}
            history={source.history.get(gpuKey(gpu))}
          />
        ))}
      </ul>
    </>
  );
}
