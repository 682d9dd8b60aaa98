; javascript
