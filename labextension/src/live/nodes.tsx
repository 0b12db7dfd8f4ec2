// Nodes: per node, CPU use, memory and object store as live bars, each with a short history.
import * as React from 'react';

import { ClusterStore } from '../model';
import { formatBytes, ResourceBar } from '../panel/resources';
import { ILiveNode, INodesReply } from './api';
import { drawHistory, pushBounded } from './draw';
import { LiveSource } from './source';

/** Samples of history kept per node (a reply every 2 s: the last 4 minutes). */
export const HISTORY = 120;
const COLOURS = { cpu: '#4e79a7', mem: '#f28e2b', store: '#59a14f' };

export interface INodeHistory {
  cpu: number[];
  mem: number[];
  store: number[];
}

const fraction = (used: number | null, total: number | null) =>
  used !== null && total ? used / total : 0;

export class NodesSource extends LiveSource<INodesReply> {
  constructor(store: ClusterStore) {
    super(store, 'nodes', 'the nodes', 2000);
  }

  nodes: ILiveNode[] = [];
  readonly history = new Map<string, INodeHistory>();

  protected reset(): void {
    this.nodes = [];
    this.history.clear();
  }

  protected ingest(reply: INodesReply): void {
    this.nodes = reply.nodes;
    const seen = new Set<string>();
    for (const node of reply.nodes) {
      seen.add(node.node_id);
      let h = this.history.get(node.node_id);
      if (!h) {
        h = { cpu: [], mem: [], store: [] };
        this.history.set(node.node_id, h);
      }
      pushBounded(
        h.cpu,
        node.alive ? (node.cpu_percent ?? 0) / 100 : 0,
        HISTORY
      );
      pushBounded(h.mem, fraction(node.mem_used, node.mem_total), HISTORY);
      pushBounded(
        h.store,
        fraction(node.object_store_used, node.object_store_total),
        HISTORY
      );
    }
    for (const id of this.history.keys()) {
      if (!seen.has(id)) {
        this.history.delete(id); // a node that left takes its history with it
      }
    }
  }

  protected summary(): string {
    const alive = this.nodes.filter(n => n.alive).length;
    return `${alive} ${alive === 1 ? 'node' : 'nodes'} alive${alive !== this.nodes.length ? `, ${this.nodes.length - alive} dead` : ''}`;
  }
}

function History({
  values,
  colour,
  label
}: {
  values: number[];
  colour: string;
  label: string;
}): JSX.Element {
  const ref = React.useRef<HTMLCanvasElement>(null);
  React.useEffect(() => {
    if (ref.current) {
      drawHistory(ref.current, [{ colour, values }], HISTORY, 24);
    }
  });
  return (
    <canvas
      ref={ref}
      className="eugo-History"
      aria-label={`${label} over the last ${HISTORY} readings`}
    />
  );
}

const percent = (value: number) => `${Math.round(value)}%`;

/** A bar, or a line saying the node's reporter has not sent this figure yet. */
function Metric({
  label,
  used,
  total,
  format
}: {
  label: string;
  used: number | null;
  total: number | null;
  format: (value: number) => string;
}): JSX.Element {
  if (used === null || total === null) {
    return (
      <div className="eugo-Bar" data-resource={label}>
        <span className="eugo-Bar-label">{label}</span>
        <span className="eugo-Empty">not reported yet</span>
      </div>
    );
  }
  return (
    <ResourceBar label={label} used={used} total={total} format={format} />
  );
}

function NodeRow({
  node,
  history
}: {
  node: ILiveNode;
  history: INodeHistory | undefined;
}): JSX.Element {
  return (
    <li
      className={`eugo-LiveNode ${node.alive ? '' : 'eugo-mod-dead'}`}
      data-node-id={node.node_id}
      aria-label={`Node ${node.node}`}
    >
      <div className="eugo-LiveNode-head">
        <span
          className={`eugo-Dot ${node.alive ? 'eugo-mod-ok' : 'eugo-mod-error'}`}
          aria-label={node.alive ? 'alive' : 'dead'}
        />
        <strong>{node.node}</strong>
        <code title={node.node_id}>{node.node_id.slice(0, 8)}</code>
        {node.cpus !== null && (
          <span className="eugo-Count">{node.cpus} CPU</span>
        )}
        {!node.alive && <span className="eugo-Tag eugo-mod-error">dead</span>}
      </div>
      <div className="eugo-LiveNode-metrics">
        <Metric
          label="CPU"
          used={node.cpu_percent}
          total={node.cpu_percent === null ? null : 100}
          format={percent}
        />
        <History values={history?.cpu ?? []} colour={COLOURS.cpu} label="CPU" />
        <Metric
          label="Mem"
          used={node.mem_used}
          total={node.mem_total}
          format={formatBytes}
        />
        <History
          values={history?.mem ?? []}
          colour={COLOURS.mem}
          label="Memory"
        />
        <Metric
          label="Store"
          used={node.object_store_used}
          total={node.object_store_total}
          format={formatBytes}
        />
        <History
          values={history?.store ?? []}
          colour={COLOURS.store}
          label="Object store"
        />
      </div>
    </li>
  );
}

export function NodesView({ source }: { source: NodesSource }): JSX.Element {
  if (!source.nodes.length) {
    return <p className="eugo-Empty">No node has joined yet.</p>;
  }
  return (
    <ul className="eugo-LiveNodes">
      {source.nodes.map(node => (
        <NodeRow
          key={node.node_id}
          node={node}
          history={source.history.get(node.node_id)}
        />
      ))}
    </ul>
  );
}
