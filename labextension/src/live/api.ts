// Typed access to the live panes' endpoints (/eugo/clusters/{id}/live/...): GET only, bounded replies.
import { URLExt } from '@jupyterlab/coreutils';

import { IWaiting, requestAPI } from '../api';

/** What every live reply carries; a cluster that is not running answers with its status and a
 * sentence instead of data. */
export interface ILiveReply {
  cluster: string;
  status: string;
  /** The server's clock (epoch seconds): the panes draw time against it, not the browser's. */
  now: number;
  message?: string | null;
  truncated?: boolean;
}

export interface ILiveTask {
  task_id: string;
  func: string;
  name: string;
  state: 'FINISHED' | 'FAILED' | 'RUNNING';
  node_id: string;
  /** The node's address; null where the server does not know it yet. */
  node: string | null;
  worker_id: string;
  start: number;
  end: number | null;
  error: string | null;
}

export interface ITasksReply extends ILiveReply {
  cursor: string;
  tasks: ILiveTask[];
}

export interface IProgressGroup {
  key: string;
  label: string;
  kind: 'function' | 'map' | 'cell';
  done: number;
  running: number;
  waiting: number;
  failed: number;
}

export interface IProgressReply extends ILiveReply {
  groups: IProgressGroup[];
  waiting: IWaiting[];
  /** Waiting tasks beyond those the server reads: their groups are unknown. */
  waiting_truncated?: number;
}

/** Figures are null where the node's reporter has not reported yet. */
export interface ILiveNode {
  node_id: string;
  node: string;
  alive: boolean;
  cpu_percent: number | null;
  cpus: number | null;
  mem_used: number | null;
  mem_total: number | null;
  object_store_used: number | null;
  object_store_total: number | null;
}

export interface INodesReply extends ILiveReply {
  nodes: ILiveNode[];
}

export interface IGpuTask {
  task_id?: string;
  pid?: number;
  func: string | null;
}

export interface ILiveGpu {
  node_id: string;
  node: string;
  index: number;
  name: string;
  utilization: number;
  memory_used: number;
  memory_total: number;
  tasks: IGpuTask[];
}

export interface IGpusReply extends ILiveReply {
  gpus: ILiveGpu[];
}

export interface IFailure {
  task_id: string;
  func: string;
  node: string | null;
  node_id?: string;
  error: string;
  traceback: string;
  end: number | null;
}

export interface IFailuresReply extends ILiveReply {
  failures: IFailure[];
}

/** `liveAPI<ITasksReply>(id, 'tasks', { since: cursor })`. */
export function liveAPI<T extends ILiveReply>(
  id: string,
  endpoint: string,
  query: Record<string, string | number | undefined> = {}
): Promise<T> {
  const params = Object.entries(query)
    .filter(([, value]) => value !== undefined && value !== '')
    .map(
      ([key, value]) =>
        `${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`
    );
  const url = URLExt.join('clusters', encodeURIComponent(id), 'live', endpoint);
  return requestAPI<T>(params.length ? `${url}?${params.join('&')}` : url);
}
