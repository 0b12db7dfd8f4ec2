// The launch form: a name, the head's CPUs/GPUs, any worker nodes, and the cluster's lifetime.
import { addIcon, closeIcon } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { ILaunchRequest, INodeSpec, Lifetime } from '../api';
import { CommandIDs } from '../commands';

const NAME_PATTERN = '[A-Za-z0-9][A-Za-z0-9 ._\\-]{0,63}';

interface INodeRowProps {
  label: string;
  spec: INodeSpec;
  onChange: (spec: INodeSpec) => void;
  onRemove?: () => void;
}

function NodeRow({ label, spec, onChange, onRemove }: INodeRowProps): JSX.Element {
  const slug = label.toLowerCase().replace(/\s+/g, '-');
  return (
    <div className="eugo-NodeSpec" data-node={slug}>
      <span className="eugo-NodeSpec-label">{label}</span>
      <input
        className="jp-mod-styled eugo-Input eugo-mod-number"
        type="number"
        min={0}
        max={1024}
        step={1}
        required
        aria-label={`${label} CPUs`}
        value={Number.isNaN(spec.num_cpus) ? '' : spec.num_cpus}
        onChange={e => onChange({ ...spec, num_cpus: e.currentTarget.valueAsNumber })}
      />
      <input
        className="jp-mod-styled eugo-Input eugo-mod-number"
        type="number"
        min={0}
        max={64}
        step={1}
        required
        aria-label={`${label} GPUs`}
        value={Number.isNaN(spec.num_gpus) ? '' : spec.num_gpus}
        onChange={e => onChange({ ...spec, num_gpus: e.currentTarget.valueAsNumber })}
      />
      {onRemove ? (
        <button
          type="button"
          className="eugo-IconButton"
          title={`Remove ${label.toLowerCase()}`}
          aria-label={`Remove ${label.toLowerCase()}`}
          onClick={onRemove}
        >
          <closeIcon.react tag="span" />
        </button>
      ) : (
        <span />
      )}
    </div>
  );
}

export function LaunchForm({ commands }: { commands: CommandRegistry }): JSX.Element {
  const [name, setName] = React.useState('dev');
  const [head, setHead] = React.useState<INodeSpec>({ num_cpus: 2, num_gpus: 0 });
  const [workers, setWorkers] = React.useState<INodeSpec[]>([]);
  const [lifetime, setLifetime] = React.useState<Lifetime>('server');
  const [pending, setPending] = React.useState(false);

  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const request: ILaunchRequest = { kind: 'local', name: name.trim(), head, workers, lifetime };
    setPending(true);
    try {
      await commands.execute(CommandIDs.launch, request as any);
    } finally {
      setPending(false);
    }
  };

  const setWorker = (index: number, spec: INodeSpec) =>
    setWorkers(workers.map((w, i) => (i === index ? spec : w)));

  return (
    <form className="eugo-Form eugo-LaunchForm" onSubmit={onSubmit}>
      <label className="eugo-Field">
        <span>Name</span>
        <input
          className="jp-mod-styled eugo-Input"
          type="text"
          required
          pattern={NAME_PATTERN}
          title="1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit"
          aria-label="Cluster name"
          value={name}
          onChange={e => setName(e.currentTarget.value)}
        />
      </label>
      <div className="eugo-NodeGrid" role="group" aria-label="Nodes">
        <span className="eugo-NodeGrid-heading">Node</span>
        <span className="eugo-NodeGrid-heading">CPUs</span>
        <span className="eugo-NodeGrid-heading">GPUs</span>
        <span />
        <NodeRow label="Head" spec={head} onChange={setHead} />
        {workers.map((spec, index) => (
          <NodeRow
            key={index}
            label={`Worker ${index + 1}`}
            spec={spec}
            onChange={s => setWorker(index, s)}
            onRemove={() => setWorkers(workers.filter((_, i) => i !== index))}
          />
        ))}
      </div>
      <button
        type="button"
        className="eugo-LinkButton"
        onClick={() => setWorkers([...workers, { num_cpus: 1, num_gpus: 0 }])}
      >
        <addIcon.react tag="span" className="eugo-LinkButton-icon" />
        Add worker node
      </button>
      <fieldset className="eugo-Lifetime">
        <legend>When the Jupyter server stops</legend>
        <label>
          <input
            type="radio"
            name="eugo-lifetime"
            value="server"
            checked={lifetime === 'server'}
            onChange={() => setLifetime('server')}
          />
          Shut the cluster down with it
        </label>
        <label>
          <input
            type="radio"
            name="eugo-lifetime"
            value="persistent"
            checked={lifetime === 'persistent'}
            onChange={() => setLifetime('persistent')}
          />
          Keep it running (a restarted server finds it)
        </label>
      </fieldset>
      <div className="eugo-Form-actions">
        <button type="submit" className="jp-Button jp-mod-styled jp-mod-accept" disabled={pending}>
          {pending ? 'Launching…' : 'Launch'}
        </button>
      </div>
    </form>
  );
}
