// The connect form: attach to a Ray cluster that already runs, by its GCS address or ray://.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { IConnectRequest } from '../api';
import { CommandIDs } from '../commands';

// host:port or ray://host:port; the server checks it properly and answers 400 with a reason.
const ADDRESS_PATTERN = '(ray://)?[A-Za-z0-9.\\-_\\[\\]:]+:[0-9]{1,5}';

export function ConnectForm({ commands }: { commands: CommandRegistry }): JSX.Element {
  const [address, setAddress] = React.useState('');
  const [name, setName] = React.useState('');
  const [pending, setPending] = React.useState(false);

  const onSubmit = async (event: React.FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const request: IConnectRequest = { kind: 'connect', address: address.trim() };
    if (name.trim()) {
      request.name = name.trim();
    }
    setPending(true);
    try {
      const model = await commands.execute(CommandIDs.connect, request as any);
      if (model) {
        setAddress('');
        setName('');
      }
    } finally {
      setPending(false);
    }
  };

  return (
    <form className="eugo-Form eugo-ConnectForm" onSubmit={onSubmit}>
      <label className="eugo-Field">
        <span>Address</span>
        <input
          className="jp-mod-styled eugo-Input"
          type="text"
          required
          placeholder="10.0.0.5:6379 or ray://head:10001"
          pattern={ADDRESS_PATTERN}
          title="host:port of the cluster's GCS, or ray://host:port"
          aria-label="Cluster address"
          value={address}
          onChange={e => setAddress(e.currentTarget.value)}
        />
      </label>
      <label className="eugo-Field">
        <span>Name</span>
        <input
          className="jp-mod-styled eugo-Input"
          type="text"
          placeholder="optional"
          aria-label="Connection name"
          value={name}
          onChange={e => setName(e.currentTarget.value)}
        />
      </label>
      <div className="eugo-Form-actions">
        <button type="submit" className="jp-Button jp-mod-styled jp-mod-accept" disabled={pending}>
          {pending ? 'Connecting…' : 'Connect'}
        </button>
      </div>
    </form>
  );
}
