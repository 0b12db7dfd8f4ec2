// Typed access to the server extension's REST API (/eugo/...): every call goes through requestAPI.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { IRunFindings } from './panel/findings';

export type ClusterStatus =
  'starting' | 'running' | 'stopping' | 'stopped' | 'error';
/** A kind the server has (`GET /eugo/kinds`), or "found" (a cluster it did not start). */
export type ClusterKind = string;
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
  /** Task records Ray let go of (it keeps a limited number): the counts are then "at least". */
  dropped?: number;
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
  resources?: {
    total?: Record<string, number>;
    available?: Record<string, number>;
  };
  /** True: the card offers Add node / Remove node. */
  scalable?: boolean;
  /** What the server says about this kind, so the panel never tests kinds by name. */
  facts?: IKindFacts | null;
  /** True: the error will not clear by itself (the server's rule). */
  final_error?: boolean;
  /** The latest profiled runs' findings, newest first (kept after their kernel is gone). */
  findings?: IRunFindings[];
}

/** The kind's own words, from the server (`facts` in the model). */
export interface IKindFacts {
  label: string;
  /** What one node is: "job" (a scheduler's) or "node". */
  node_label: string;
  /** What Shut down does, as a sentence for the confirmation. */
  stop_effect: string;
  scalable: boolean;
  fields: string[];
}

/** One job of a batch-scheduler cluster: the head's or a worker's. */
export interface IBatchJob {
  id: string;
  role: 'head' | 'worker';
  state: string;
  /** For a pending job, the scheduler's reason as a sentence. */
  reason: string | null;
  nodes: string[];
  /** Seconds until the wall time ends (null when the scheduler does not say). */
  time_left: number | null;
}

export interface IBatchState {
  dir?: string | null;
  walltime?: string | null;
  jobs: IBatchJob[];
  error?: string;
}

/** The batch schedulers' state in a model: the key named after its kind. */
export function batchState(cluster: ICluster): IBatchState | undefined {
  const state = (cluster as unknown as Record<string, unknown>)[cluster.kind];
  const rows = cluster.facts?.node_label;
  return (rows === 'job' || rows === 'pod') && state
    ? (state as IBatchState)
    : undefined;
}

/** A batch launch body: the scheduler's part under its kind's name. */
export interface IBatchRequest {
  kind: string;
  name: string;
  lifetime: Lifetime;
  profile?: string;
  [part: string]: unknown;
}

/** A launch profile from the server's configuration (`GET /eugo/profiles`). */
export interface IProfile {
  name: string;
  description: string;
  kind: string;
  body: { kind: string; [key: string]: unknown };
  /** Fields the user may change, as "slurm.walltime" paths. */
  editable: string[];
}

/** What a launch would run (`POST /eugo/clusters/preview`); nothing is started. */
export interface IPlan {
  kind: string;
  name: string;
  summary: string;
  scripts: { name: string; count: number; text: string }[];
  commands: string[][];
}

export interface INodeSpec {
  num_cpus: number;
  num_gpus: number;
  memory?: number | null;
  object_store_memory?: number | null;
}

export interface ILocalRequest {
  kind: 'local';
  name: string;
  head: INodeSpec;
  workers: INodeSpec[];
  lifetime: Lifetime;
}

/** Any launch body: local nodes on this machine or a batch scheduler's jobs. */
export type ILaunchRequest = ILocalRequest | IBatchRequest;

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
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {}
): Promise<T> {
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
  return {
    method,
    body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json' }
  };
}

const path = (id: string, ...rest: string[]): string =>
  URLExt.join('clusters', encodeURIComponent(id), ...rest);

export const listClusters = (): Promise<ICluster[]> =>
  requestAPI<ICluster[]>('clusters');

export const getCluster = (id: string): Promise<ICluster> =>
  requestAPI<ICluster>(path(id));

export const launchCluster = (request: ILaunchRequest): Promise<ICluster> =>
  requestAPI<ICluster>('clusters', jsonBody('POST', request));

export const connectCluster = (request: IConnectRequest): Promise<ICluster> =>
  requestAPI<ICluster>('clusters', jsonBody('POST', request));

export const previewLaunch = (request: ILaunchRequest): Promise<IPlan> =>
  requestAPI<IPlan>('clusters/preview', jsonBody('POST', request));

export const listProfiles = (): Promise<IProfile[]> =>
  requestAPI<IProfile[]>('profiles');

/** One field of a kind's launch form, as the server declares it: a key of the body's part
 * named after the kind (a dotted key, `head.cpus`, goes that deep into it). */
export interface IFormField {
  key: string;
  label: string;
  type: 'text' | 'count' | 'lines';
  default: string | number;
  placeholder?: string;
  title?: string;
  min?: number;
  max?: number;
}

/** A kind's launch form: "nodes" is the local form's node rows, "fields" the fields below. */
export interface IKindForm {
  label: string;
  widget: 'nodes' | 'fields';
  rank: number;
  hint: string;
  fields: IFormField[];
}

/** What the server says of each kind (`GET /eugo/kinds`); `available` only where it varies. */
export interface IKindInfo {
  label?: string;
  available?: boolean;
  /** Its launch form; null for a kind launched elsewhere in the panel (ssh, connect). */
  form?: IKindForm | null;
}

/** The kinds the launch section offers, in the server's order, with their forms. */
export function launchKinds(
  kinds: Record<string, IKindInfo>
): { kind: string; form: IKindForm }[] {
  return Object.entries(kinds)
    .filter(([, info]) => info.form && info.available !== false)
    .map(([kind, info]) => ({ kind, form: info.form as IKindForm }))
    .sort((a, b) => a.form.rank - b.form.rank);
}

export const listKinds = (): Promise<Record<string, IKindInfo>> =>
  requestAPI<Record<string, IKindInfo>>('kinds');

export const addNode = (id: string): Promise<ICluster> =>
  requestAPI<ICluster>(path(id, 'nodes'), { method: 'POST' });

export const removeNode = (id: string, node: string): Promise<ICluster> =>
  requestAPI<ICluster>(path(id, 'nodes', encodeURIComponent(node)), {
    method: 'DELETE'
  });

export const activateCluster = (id: string): Promise<ICluster> =>
  requestAPI<ICluster>(path(id, 'activate'), { method: 'POST' });

/** `confirm`: the user agreed to stop a cluster the Manager did not start (kind "found"). */
export const shutdownCluster = (id: string, confirm = false): Promise<void> =>
  requestAPI<void>(path(id) + (confirm ? '?confirm=true' : ''), {
    method: 'DELETE'
  });

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
