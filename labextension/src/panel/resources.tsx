// How a cluster's resources read: usage bars, the node table, the waiting banner.
import * as React from 'react';

import { ICluster, INode, IWaiting } from '../api';

/** Used and total of one resource: the server's sums, else added up over the alive nodes. */
export function usage(cluster: ICluster, key: string): { used: number; total: number } {
  const sums = cluster.resources;
  if (sums?.total && key in sums.total) {
    const total = sums.total[key];
    return { used: Math.max(0, total - (sums.available?.[key] ?? total)), total };
  }
  let used = 0;
  let total = 0;
  for (const node of cluster.nodes) {
    if (!node.alive) {
      continue;
    }
    const t = node.resources_total[key] ?? 0;
    total += t;
    used += Math.max(0, t - (node.resources_available[key] ?? t));
  }
  return { used, total };
}

/** 0.5 -> "0.5", 2 -> "2", 0.3333 -> "0.33". */
export function formatAmount(value: number): string {
  return Number.isInteger(value) ? String(value) : String(Math.round(value * 100) / 100);
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value >= 10 || unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

const RESOURCE_NAMES: Record<string, string> = {
  CPU: 'CPU',
  num_cpus: 'CPU',
  GPU: 'GPU',
  num_gpus: 'GPU',
  memory: 'memory'
};

/** {CPU: 1, GPU: 1} -> "1 CPU, 1 GPU". */
export function describeRequest(request: Record<string, number>): string {
  const parts = Object.entries(request)
    .filter(([key]) => !key.startsWith('node:') && key !== 'bundle')
    .map(([key, value]) => {
      const name = RESOURCE_NAMES[key] ?? key;
      return name === 'memory' ? `${formatBytes(value)} memory` : `${formatAmount(value)} ${name}`;
    });
  return parts.length ? parts.join(', ') : 'no resources';
}

interface IBarProps {
  label: string;
  used: number;
  total: number;
  format?: (value: number) => string;
}

export function ResourceBar({ label, used, total, format = formatAmount }: IBarProps): JSX.Element {
  const fraction = total > 0 ? Math.min(1, used / total) : 0;
  const level = fraction >= 0.9 ? 'eugo-mod-full' : fraction >= 0.6 ? 'eugo-mod-busy' : '';
  return (
    <div className="eugo-Bar" data-resource={label}>
      <span className="eugo-Bar-label">{label}</span>
      <div
        className={`eugo-Bar-track ${level}`}
        role="meter"
        aria-label={`${label} in use`}
        aria-valuemin={0}
        aria-valuemax={total}
        aria-valuenow={used}
      >
        <div className="eugo-Bar-fill" style={{ width: `${fraction * 100}%` }} />
      </div>
      <span className="eugo-Bar-value">
        {total > 0 ? `${format(used)} / ${format(total)}` : 'none'}
      </span>
    </div>
  );
}

function cell(node: INode, key: string, format = formatAmount): string {
  const total = node.resources_total[key] ?? 0;
  if (total === 0) {
    return '–';
  }
  const used = Math.max(0, total - (node.resources_available[key] ?? total));
  return `${format(used)} / ${format(total)}`;
}

function gpuTitle(node: INode): string | undefined {
  if (!node.gpus.length) {
    return undefined;
  }
  return node.gpus
    .map(g => {
      const parts = [g.name ?? 'GPU'];
      if (typeof g.utilization === 'number') {
        parts.push(`${g.utilization}% busy`);
      }
      if (typeof g.memory_used === 'number' && typeof g.memory_total === 'number') {
        parts.push(`${formatBytes(g.memory_used)} / ${formatBytes(g.memory_total)}`);
      }
      return parts.join(', ');
    })
    .join('\n');
}

export function NodeTable({ nodes }: { nodes: readonly INode[] }): JSX.Element {
  if (!nodes.length) {
    return <p className="eugo-Empty">No node has joined yet.</p>;
  }
  return (
    <table className="eugo-NodeTable">
      <thead>
        <tr>
          <th>Node</th>
          <th>CPU</th>
          <th>GPU</th>
          <th title="Memory Ray may schedule on the node">Mem</th>
        </tr>
      </thead>
      <tbody>
        {nodes.map(node => (
          <tr
            key={node.node_id}
            className={node.alive ? 'eugo-mod-alive' : 'eugo-mod-dead'}
            title={`${node.node_id}${node.address ? ` at ${node.address}` : ''}`}
          >
            <td>
              <span
                className={`eugo-Dot ${node.alive ? 'eugo-mod-ok' : 'eugo-mod-error'}`}
                role="img"
                aria-label={node.alive ? 'alive' : 'dead'}
                title={node.alive ? 'alive' : 'dead'}
              />
              <code>{node.node_id.slice(0, 6)}</code>
              {node.is_head && <span className="eugo-Tag">head</span>}
              {!node.alive && <span className="eugo-Tag eugo-mod-error">dead</span>}
            </td>
            <td>{cell(node, 'CPU')}</td>
            <td title={gpuTitle(node)}>
              {cell(node, 'GPU')}
              {node.gpus.length > 0 && node.gpus[0].name && (
                <div className="eugo-NodeTable-gpu">{node.gpus[0].name}</div>
              )}
            </td>
            <td title={cell(node, 'memory', formatBytes)}>
              {formatBytes(node.resources_total.memory ?? 0)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Stands out when a request can never run; quieter for requests queued behind busy nodes. */
export function WaitingBanner({ waiting }: { waiting: readonly IWaiting[] }): JSX.Element | null {
  const infeasible = waiting.filter(w => w.infeasible);
  const queued = waiting.filter(w => !w.infeasible);
  if (!waiting.length) {
    return null;
  }
  const plural = (n: number) => (n === 1 ? '1 task waits' : `${n} tasks wait`);
  // The server's reason already names the request; spell the request out only without one.
  const line = (w: IWaiting) =>
    `${plural(w.count)}: ${w.reason || `for ${describeRequest(w.request)}`}`;
  const list = (items: IWaiting[]) => (
    <ul>
      {items.map((w, i) => (
        <li key={i} title={`Request: ${describeRequest(w.request)}`}>
          {line(w)}
        </li>
      ))}
    </ul>
  );
  return (
    <>
      {infeasible.length > 0 && (
        <div className="eugo-Banner eugo-mod-infeasible" role="alert">
          <strong className="eugo-Banner-title">Waiting on resources no node has</strong>
          {list(infeasible)}
        </div>
      )}
      {queued.length > 0 && (
        <div className="eugo-Banner eugo-mod-queued" role="status">
          {list(queued)}
        </div>
      )}
    </>
  );
}
