import './base.css';
import './card.css';
