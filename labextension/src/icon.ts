// The EugoHPC Manager icon: three linked nodes, themed through JupyterLab's jp-icon3 class.
import { LabIcon } from '@jupyterlab/ui-components';

import svgstr from '../style/icons/eugo.svg';

export const eugoIcon = new LabIcon({ name: 'eugo_jupyter:manager', svgstr });
