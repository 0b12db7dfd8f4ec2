// Typed access to the server extension's REST API (/eugo/...): every call goes through requestAPI.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { IRunFindings } from './panel/findings';

export type ClusterStatus = 'starting' | 'running' | 'stopping' | 'stopped' | 'error';
export type ClusterKind = 'local' | 'connect';
export type Lifetime = 'server' | 'persistent';

/** One GPU on a node, as NVML reports it (fields absent where NVML is not available). */
export interface IGpu {
  index?: number;
  name?: string;
  memory_total?: number;
  memory_used?: number;
  utilization?: number;
  [key: string]: unknown;
}

export interface INode {
  node_id: string;
  alive: boolean;
  address?: string;
  is_head?: boolean;
  resources_total: Record<string, number>;
  resources_available: Record<string, number>;
  gpus: IGpu[];
}

export interface ITaskCounts {
  pending: number;
  running: number;
  finished: number;
  failed: number;
}

/** A resource request that no node is running yet. */
export interface IWaiting {
  request: Record<string, number>;
  count: number;
  infeasible: boolean;
  reason: string;
  /** Names of the functions behind the request, where the server knows them. */
  functions?: string[];
}

export interface ICluster {
  id: string;
  name: string;
  kind: ClusterKind;
  status: ClusterStatus;
  active: boolean;
  address: string | null;
  /** Ray's own dashboard port: reachable only from the server's machine. */
  dashboard_url: string | null;
  /** The dashboard behind Jupyter's auth, relative to the server's base URL. */
  dashboard_proxy?: string | null;
  nodes: INode[];
  tasks: ITaskCounts;
  waiting: IWaiting[];
  /** Set when status is "error", or when the last monitoring read failed. */
  error?: string | null;
  lifetime?: Lifetime | null;
  created?: string;
  /** When the monitoring fields were last read. */
  updated?: string | null;
  /** Sums over alive nodes (`{}` until the first read). */
  resources?: { total?: Record<string, number>; available?: Record<string, number> };
  /** The latest profiled runs' findings, newest first (kept after their kernel is gone). */
  findings?: IRunFindings[];
}

export interface INodeSpec {
  num_cpus: number;
  num_gpus: number;
  memory?: number | null;
  object_store_memory?: number | null;
}

export interface ILaunchRequest {
  kind: 'local';
  name: string;
  head: INodeSpec;
  workers: INodeSpec[];
  lifetime: Lifetime;
}

export interface IConnectRequest {
  kind: 'connect';
  address: string;
  name?: string;
}

/**
 * Call the server extension: `requestAPI<ICluster[]>('clusters')`.
 *
 * Resolves with the parsed JSON body (undefined for an empty 204 answer); rejects with a
 * ServerConnection.ResponseError whose message is the server's own sentence.
 */
export async function requestAPI<T>(endPoint = '', init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'eugo', endPoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = undefined;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    // The server extension answers JSON {"message": ...}; anything else (an HTML 404 page when
    // the extension is not enabled) is summarised by its status instead of shown raw.
    const message =
      (data && typeof data === 'object' && (data.message || data.reason)) ||
      (response.status === 404 && !endPoint.startsWith('clusters/')
        ? 'the eugo_jupyter server extension is not enabled (404); check `jupyter server extension list`'
        : `${response.status} ${response.statusText}`);
    throw new ServerConnection.ResponseError(response, message);
  }
  return data as T;
}

function jsonBody(method: string, body: unknown): RequestInit {
  return { method, body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } };
}

const path = (id: string, ...rest: string[]): string =>
  URLExt.join('clusters', encodeURIComponent(id), ...rest);

export const listClusters = (): Promise<ICluster[]> => requestAPI<ICluster[]>('clusters');

export const getCluster = (id: string): Promise<ICluster> => requestAPI<ICluster>(path(id));

export const launchCluster = (request: ILaunchRequest): Promise<ICluster> =>
  requestAPI<ICluster>('clusters', jsonBody('POST', request));

export const connectCluster = (request: IConnectRequest): Promise<ICluster> =>
  requestAPI<ICluster>('clusters', jsonBody('POST', request));

export const activateCluster = (id: string): Promise<ICluster> =>
  requestAPI<ICluster>(path(id, 'activate'), { method: 'POST' });

export const shutdownCluster = (id: string): Promise<void> =>
  requestAPI<void>(path(id), { method: 'DELETE' });

/**
 * The dashboard link as the browser should open it: through the Jupyter server (behind its
 * auth, and reachable wherever JupyterLab is) when the server proxies it, else Ray's own URL.
 */
export function dashboardHref(cluster: ICluster): string | null {
  const base = ServerConnection.makeSettings().baseUrl;
  if (cluster.dashboard_proxy) {
    return URLExt.join(base, cluster.dashboard_proxy);
  }
  const url = cluster.dashboard_url;
  if (!url) {
    return null;
  }
  return /^[a-z]+:\/\//i.test(url) ? url : URLExt.join(base, url);
}
