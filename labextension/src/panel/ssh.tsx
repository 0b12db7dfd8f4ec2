// SSH hosts in the panel: the launch form, each host's state on the card, found clusters'
// Connect button and the idle / lifetime countdown.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { ICluster, requestAPI } from '../api';
import { CommandIDs } from '../commands';
import { FormActions, NumberField, TextField } from './fields';

/** One host of an ssh cluster, as the server reports it (`model.ssh.hosts[]`). */
export interface ISshHost {
  host: string;
  address: string;
  status: 'joined' | 'failed';
  reason: string | null;
}

/** The countdown of a cluster launched with an idle timeout or a maximum lifetime. */
export interface IExpiry {
  idle_timeout: number | null;
  max_lifetime: number | null;
  stops_in: number | null;
  stops_because: 'idle' | 'max_lifetime' | null;
  fired: string | null;
  reason: string | null;
}

/** The parts of a model this file reads beyond ICluster. */
export interface IClusterExtras {
  ssh?: { hosts?: ISshHost[] };
  expiry?: IExpiry | null;
  found?: { temp_dir: string; session_dir: string; pid: number };
}

function minutes(seconds: number): string {
  const m = Math.floor(seconds / 60);
  const s = Math.floor(seconds % 60);
  return `${m}:${s.toString().padStart(2, '0')}`;
}

/** Host states, the found cluster's Connect and the countdown, under a card's notices. */
export function ClusterExtras({
  cluster,
  commands
}: {
  cluster: ICluster;
  commands: CommandRegistry;
}): JSX.Element | null {
  const extras = cluster as ICluster & IClusterExtras;
  const [error, setError] = React.useState<string | null>(null);
  const hosts = extras.ssh?.hosts ?? [];
  const expiry = extras.expiry;
  const connect = async () => {
    setError(null);
    try {
      await requestAPI('clusters', {
        method: 'POST',
        body: JSON.stringify({ kind: 'connect', address: cluster.address })
      });
      await commands.execute(CommandIDs.refresh);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <>
      {hosts.length > 0 && (
        <ul className="eugo-SshHosts" aria-label="SSH hosts">
          {hosts.map(h => (
            <li
              key={h.host}
              data-host={h.host}
              className={`eugo-mod-${h.status}`}
            >
              <code>{h.host}</code>{' '}
              {h.status === 'joined' ? 'joined' : 'did not join'}
              {h.reason && (
                <div className="eugo-Notice eugo-mod-warn">{h.reason}</div>
              )}
            </li>
          ))}
        </ul>
      )}
      {expiry && expiry.stops_in !== null && (
        <div className="eugo-Expiry" role="timer">
          Stops in {minutes(expiry.stops_in)} (
          {expiry.stops_because === 'idle'
            ? 'idle timeout'
            : 'maximum lifetime'}
          )
        </div>
      )}
      {expiry?.reason && (
        <div className="eugo-Notice eugo-mod-warn">{expiry.reason}</div>
      )}
      {extras.found && (
        <div className="eugo-Found">
          <span>
            Started outside the Manager (temp folder {extras.found.temp_dir}).
          </span>
          <button
            type="button"
            className="jp-Button jp-mod-styled"
            onClick={connect}
          >
            Connect
          </button>
        </div>
      )}
      {error && (
        <div className="eugo-Notice eugo-mod-error" role="alert">
          {error}
        </div>
      )}
    </>
  );
}

/** The "Launch on SSH hosts" form: hosts, user, key, port, where ray lives, the head's place. */
export function SshLaunchForm({
  commands
}: {
  commands: CommandRegistry;
}): JSX.Element {
  const [hosts, setHosts] = React.useState('');
  const [user, setUser] = React.useState('');
  const [keyFile, setKeyFile] = React.useState('');
  const [port, setPort] = React.useState(22);
  const [rayPath, setRayPath] = React.useState('');
  const [headOn, setHeadOn] = React.useState<'local' | 'first_host'>('local');
  const [cpus, setCpus] = React.useState(1);
  const [gpus, setGpus] = React.useState(0);
  const [pending, setPending] = React.useState(false);
  const [error, setError] = React.useState<string | null>(null);

  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const ssh: Record<string, unknown> = {
      hosts: hosts.split(/[\s,]+/).filter(h => h),
      port,
      head_on: headOn,
      cpus_per_host: cpus,
      gpus_per_host: gpus
    };
    if (user.trim()) {
      ssh.user = user.trim();
    }
    if (keyFile.trim()) {
      ssh.key_file = keyFile.trim();
    }
    if (rayPath.trim()) {
      ssh.ray_path = rayPath.trim();
    }
    setPending(true);
    setError(null);
    try {
      await requestAPI('clusters', {
        method: 'POST',
        body: JSON.stringify({ kind: 'ssh', name: 'ssh', ssh })
      });
      await commands.execute(CommandIDs.refresh);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setPending(false);
    }
  };

  return (
    <form className="eugo-Form eugo-SshForm" onSubmit={onSubmit}>
      <label className="eugo-Field">
        <span>Hosts</span>
        <textarea
          className="jp-mod-styled eugo-Input"
          required
          aria-label="SSH hosts"
          placeholder="10.0.0.11, gpu-box"
          value={hosts}
          onChange={e => setHosts(e.currentTarget.value)}
        />
      </label>
      <TextField
        label="User"
        ariaLabel="User"
        placeholder="your user name"
        value={user}
        onChange={setUser}
      />
      <TextField
        label="Key file"
        ariaLabel="Key file"
        placeholder="~/.ssh/id_ed25519"
        value={keyFile}
        onChange={setKeyFile}
      />
      <NumberField
        label="Port"
        value={port}
        onChange={setPort}
        min={0}
        max={65535}
        required={false}
      />
      <TextField
        label="Ray path"
        ariaLabel="Ray path"
        placeholder="ray (on the hosts)"
        value={rayPath}
        onChange={setRayPath}
      />
      <NumberField
        label="CPUs per host"
        value={cpus}
        onChange={setCpus}
        min={0}
        max={1024}
        required={false}
      />
      <NumberField
        label="GPUs per host"
        value={gpus}
        onChange={setGpus}
        min={0}
        max={64}
        required={false}
      />
      <fieldset className="eugo-Lifetime">
        <legend>Head</legend>
        <label>
          <input
            type="radio"
            name="eugo-head-on"
            checked={headOn === 'local'}
            onChange={() => setHeadOn('local')}
          />
          On this machine
        </label>
        <label>
          <input
            type="radio"
            name="eugo-head-on"
            checked={headOn === 'first_host'}
            onChange={() => setHeadOn('first_host')}
          />
          On the first host
        </label>
      </fieldset>
      {error && (
        <div className="eugo-Notice eugo-mod-error" role="alert">
          {error}
        </div>
      )}
      <FormActions
        pending={pending}
        label="Launch on SSH hosts"
        pendingLabel="Launching…"
      />
    </form>
  );
}
